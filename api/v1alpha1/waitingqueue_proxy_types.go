package v1alpha1

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// FailurePolicy says what the admission proxy does with new visitors while Redis is unreachable.
// +kubebuilder:validation:Enum=FailClosed;FailOpen
type FailurePolicy string

const (
	// FailClosed answers enter and status with 503 and keeps protected routes closed to visitors
	// without a pass. Visitors holding a valid pass keep working.
	FailClosed FailurePolicy = "FailClosed"
	// FailOpen lets requests to protected routes through without a pass while Redis is unreachable.
	FailOpen FailurePolicy = "FailOpen"
)

// ProxySpec configures the admission proxy Deployment.
// +kubebuilder:validation:XValidation:rule="has(self.shared) == has(self.hosts)",message="proxy.hosts is required with proxy.shared, and only with it: a shared proxy set picks a request's room by its host"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.shared)",message="proxy.autoscaling is for a room's own proxy Deployment: a shared proxy set runs the replicas its rooms ask for",fieldPath=".autoscaling"
type ProxySpec struct {
	// replicas is the number of admission proxy pods. Between 0 and 1000. Defaults to 2. With
	// autoscaling, the HorizontalPodAutoscaler sets the number and replicas is not used.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// resources are the compute resources of the proxy container. Defaults to requests of 100m CPU
	// and 64Mi memory and a 256Mi memory limit.
	// +optional
	Resources *ProxyResources `json:"resources,omitempty"`

	// failurePolicy says what new visitors get while Redis is unreachable: FailClosed (503 on enter
	// and status; protected routes stay closed) or FailOpen (protected routes pass without a pass).
	// Valid passes keep working either way. Defaults to FailClosed.
	// +optional
	// +kubebuilder:default=FailClosed
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// shared names a proxy set in the WaitingQueue's namespace. The rooms that name the same set are
	// served by one admission proxy Deployment, herdgate-set-<shared>, which picks a request's room
	// by its host (hosts): a platform with many rooms runs a few proxy replicas, not a Deployment per
	// room. Each room keeps its own keys, plan, page and limits, and a pass of one room opens no
	// other. The set runs the most replicas any of its rooms asks for, with the resources of its
	// oldest room. Needs enforcement Proxy. Unset: the room has a proxy Deployment of its own.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Shared string `json:"shared,omitempty"`

	// hosts are the hosts the shared proxy set serves this room on: a request whose Host, without
	// its port and in any letter case, is one of them is this room's. Required with shared, and only
	// with it; 1 to 16 lower-case DNS names. Rooms of a set may name one host: a request goes to the
	// room with the most specific protected route for it, and herdgate's own paths to the room their
	// room or return parameter names. A room that protects a route an older room of the host
	// protects already is refused that route by the set's proxies (condition Programmed), and serves
	// the rest.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Hosts []Hostname `json:"hosts,omitempty"`

	// autoscaling, when set, scales the proxy Deployment with a HorizontalPodAutoscaler
	// (autoscaling/v2) on the proxies' CPU, between minReplicas and maxReplicas. The operator then
	// leaves the Deployment's replica count to the autoscaler, and the PodDisruptionBudget follows
	// minReplicas. Not with shared.
	// +optional
	Autoscaling *ProxyAutoscaling `json:"autoscaling,omitempty"`
}

// ProxyAutoscaling scales the admission proxy Deployment on its CPU use. The cluster needs a
// resource metrics source (metrics-server) for the autoscaler to read the pods' CPU; without one it
// keeps minReplicas.
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="proxy.autoscaling.minReplicas must not exceed maxReplicas",fieldPath=".minReplicas"
type ProxyAutoscaling struct {
	// minReplicas is the fewest proxy pods. Between 1 and 1000. Defaults to 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most proxy pods. Between 1 and 1000, at least minReplicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas"`

	// targetCPUUtilizationPercentage is the mean CPU use of the proxy pods, in percent of their CPU
	// request (spec.proxy.resources), that the autoscaler keeps them at. Between 1 and 100. Defaults
	// to 70.
	// +optional
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// Hostname is a lower-case DNS name, such as "shop.example", without a port: labels of at most 63
// characters, 253 in all (RFC 1123).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`
type Hostname string

// ProxyResources are the compute resources of the proxy container, as a container's requests and
// limits. The rules comparing quantities skip one whose exponent has three digits or more, which the
// schema refuses (see ResourceQuantity) and which they could not read in time.
//
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, string(self.requests[k]).matches('[eE][+-]?[0-9]{3}') || !quantity(string(self.requests[k])).isLessThan(quantity('0')))",message="proxy.resources.requests must not be negative",fieldPath=".requests"
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, string(self.limits[k]).matches('[eE][+-]?[0-9]{3}') || !quantity(string(self.limits[k])).isLessThan(quantity('0')))",message="proxy.resources.limits must not be negative",fieldPath=".limits"
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(k, !(k in self.requests) || !(k in self.limits) || string(self.requests[k]).matches('[eE][+-]?[0-9]{3}') || string(self.limits[k]).matches('[eE][+-]?[0-9]{3}') || !quantity(string(self.limits[k])).isLessThan(quantity(string(self.requests[k]))))",message="proxy.resources.requests of cpu, memory and ephemeral-storage must not exceed their limits",fieldPath=".requests"
type ProxyResources struct {
	// requests are the resources the proxy container is guaranteed, by name: cpu, memory,
	// ephemeral-storage, hugepages-<size> or a fully qualified extended resource. At most 8.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="proxy.resources.requests names must be cpu, memory, ephemeral-storage, hugepages-<size> or a fully qualified extended resource such as example.com/device"
	Requests ResourceQuantities `json:"requests,omitempty"`

	// limits are the most resources the proxy container may use, by name as in requests. At most 8.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="proxy.resources.limits names must be cpu, memory, ephemeral-storage, hugepages-<size> or a fully qualified extended resource such as example.com/device"
	Limits ResourceQuantities `json:"limits,omitempty"`
}

// ResourceQuantities are resources by name, as a container's requests or limits.
type ResourceQuantities map[corev1.ResourceName]ResourceQuantity

// ResourceQuantity is a Kubernetes quantity, such as "100m", "64Mi", "1e3" or 2, of at most 32
// characters and with an exponent of at most two digits. Reading a quantity computes every digit of
// it: one such as "1e-999999999" would take the API server, the manager and the proxies minutes and
// gigabytes, so the schema refuses it before anything reads it.
//
// +kubebuilder:validation:XIntOrString
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$`
type ResourceQuantity string

// UnmarshalJSON takes a quantity written as a string or as a number.
func (q *ResourceQuantity) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*q = ResourceQuantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a quantity is a string such as \"100m\" or a number: %w", err)
	}
	*q = ResourceQuantity(n.String())
	return nil
}

// Quantity parses q; the schema's checks make it cheap to.
func (q ResourceQuantity) Quantity() (resource.Quantity, error) {
	return resource.ParseQuantity(string(q))
}

// ResourceList is r as a container takes it.
func (r ResourceQuantities) ResourceList() (corev1.ResourceList, error) {
	out := make(corev1.ResourceList, len(r))
	for name, q := range r {
		parsed, err := q.Quantity()
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", name, string(q), err)
		}
		out[name] = parsed
	}
	return out, nil
}
