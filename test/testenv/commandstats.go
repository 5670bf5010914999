package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CommandStat is what Redis' INFO commandstats says of one command: its calls and the time spent in
// them.
type CommandStat struct {
	Calls int64
	Time  time.Duration
}

// CommandStats asks rdb's Redis for INFO commandstats and reads it (ParseCommandStats).
func CommandStats(ctx context.Context, rdb redis.UniversalClient) (map[string]CommandStat, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return ParseCommandStats(info)
}

// ParseCommandStats reads the answer to INFO commandstats, by command ("evalsha", "ping").
func ParseCommandStats(info string) (map[string]CommandStat, error) {
	stats := map[string]CommandStat{}
	for _, line := range strings.Split(info, "\r\n") {
		name, fields, ok := strings.Cut(line, ":")
		name, isCommand := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCommand {
			continue
		}
		var st CommandStat
		for _, kv := range strings.Split(fields, ",") {
			key, v, _ := strings.Cut(kv, "=")
			if key != "calls" && key != "usec" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
			}
			if key == "calls" {
				st.Calls = n
			} else {
				st.Time = time.Duration(n) * time.Microsecond
			}
		}
		stats[name] = st
	}
	return stats, nil
}
