package testenv

import "github.com/prometheus/client_golang/prometheus"

// RoomCounter reads the counter name of the room namespace/name from g (the manager's registry,
// where the scheduler's per-room series are); 0 when the room has no such series yet.
func RoomCounter(g prometheus.Gatherer, name, namespace, room string) (float64, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == namespace && labels["name"] == room {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, nil
}
