package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
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
type ProxySpec struct {
	// replicas is the number of admission proxy pods. Between 0 and 1000. Defaults to 2.
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
}

// ProxyResources are the compute resources of the proxy container, as a container's requests and
// limits.
//
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, !quantity(string(self.requests[k])).isLessThan(quantity('0')))",message="proxy.resources.requests must not be negative",fieldPath=".requests"
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, !quantity(string(self.limits[k])).isLessThan(quantity('0')))",message="proxy.resources.limits must not be negative",fieldPath=".limits"
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(k, !(k in self.requests) || !(k in self.limits) || !quantity(string(self.limits[k])).isLessThan(quantity(string(self.requests[k]))))",message="proxy.resources.requests of cpu, memory and ephemeral-storage must not exceed their limits",fieldPath=".requests"
type ProxyResources struct {
	// requests are the resources the proxy container is guaranteed, by name: cpu, memory,
	// ephemeral-storage, hugepages-<size> or a fully qualified extended resource. At most 8.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="proxy.resources.requests names must be cpu, memory, ephemeral-storage, hugepages-<size> or a fully qualified extended resource such as example.com/device"
	Requests corev1.ResourceList `json:"requests,omitempty"`

	// limits are the most resources the proxy container may use, by name as in requests. At most 8.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || k.contains('/'))",message="proxy.resources.limits names must be cpu, memory, ephemeral-storage, hugepages-<size> or a fully qualified extended resource such as example.com/device"
	Limits corev1.ResourceList `json:"limits,omitempty"`
}
