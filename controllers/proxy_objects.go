package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
)

// Names, labels and ports of the objects the operator runs for each WaitingQueue.
const (
	// ProxyHTTPPort serves visitors; ProxyMetricsPort serves /metrics.
	ProxyHTTPPort    = 8080
	ProxyMetricsPort = 9090
	// ProxyExtAuthzPort serves Envoy's gRPC ext_authz check, with spec.enforcement Gateway.
	ProxyExtAuthzPort = 9191

	// ConfigHashAnnotation on the proxy's pod template changes when the pods must restart to see a
	// change (the Redis URL, the image); everything else the proxy watches and applies live.
	ConfigHashAnnotation = "herdgate.io/config-hash"

	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
	labelManagedBy = "app.kubernetes.io/managed-by"
	// LabelWaitingQueue names the WaitingQueue an object belongs to.
	LabelWaitingQueue = "herdgate.io/waitingqueue"

	proxyUID = 65532
	// keyMountPath is where the proxy container finds the queue's Secret: only its HMAC key and the
	// copies of the values the spec refers to are mounted, so the proxy needs no access to Secrets
	// through the API (and never sees the Redis URL's file or the draw's seed).
	keyMountPath = "/etc/herdgate/secret"
)

func proxySelector(wq *herdgatev1alpha1.WaitingQueue) map[string]string {
	return map[string]string{labelName: "herdgate-proxy", labelInstance: wq.Name}
}

func proxyLabels(wq *herdgatev1alpha1.WaitingQueue) map[string]string {
	l := proxySelector(wq)
	l[labelComponent] = "admission-proxy"
	l[labelManagedBy] = "herdgate"
	l[LabelWaitingQueue] = wq.Name
	return l
}

func ownerRef(wq *herdgatev1alpha1.WaitingQueue) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(herdgatev1alpha1.GroupVersion.String()).
		WithKind("WaitingQueue").
		WithName(wq.Name).
		WithUID(wq.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// proxyWorkload is what the objects of a proxy Deployment are made of: a room's own (workloadOf),
// or a shared proxy set's (proxy_set.go).
type proxyWorkload struct {
	name, namespace  string
	labels, selector map[string]string
	owners           []*metav1ac.OwnerReferenceApplyConfiguration
	replicas         int32
	// autoscaling, when set, leaves the replica count to a HorizontalPodAutoscaler (autoscaler).
	autoscaling *herdgatev1alpha1.ProxyAutoscaling
	resources   *corev1ac.ResourceRequirementsApplyConfiguration
	args        []string
	env         []*corev1ac.EnvVarApplyConfiguration
	secret      *corev1ac.SecretVolumeSourceApplyConfiguration
	configHash  string
	// role is what the proxy may read: its room, or the rooms of its namespace.
	role *rbacv1ac.PolicyRuleApplyConfiguration
	// serviceName names the Service; gateway serves the gRPC check too.
	serviceName string
	gateway     bool
}

// workloadOf is the proxy Deployment of wq's own; refKeys are the keys of the queue's Secret that
// hold copies of values the spec refers to, mounted beside the HMAC key.
func workloadOf(wq *herdgatev1alpha1.WaitingQueue, redisURL, image string, refKeys []string) proxyWorkload {
	items := []*corev1ac.KeyToPathApplyConfiguration{corev1ac.KeyToPath().WithKey(herdgatev1alpha1.SecretHMACKey).WithPath(herdgatev1alpha1.SecretHMACKey)}
	for _, k := range refKeys {
		items = append(items, corev1ac.KeyToPath().WithKey(k).WithPath(k))
	}
	return proxyWorkload{
		name: wq.ProxyName(), namespace: wq.Namespace, labels: proxyLabels(wq), selector: proxySelector(wq),
		owners: []*metav1ac.OwnerReferenceApplyConfiguration{ownerRef(wq)}, replicas: wq.Spec.EffectiveProxyReplicas(),
		autoscaling: wq.Spec.EffectiveProxyAutoscaling(), resources: proxyResources(wq),
		args: []string{
			"--waitingqueue=" + wq.Namespace + "/" + wq.Name,
			"--hmac-key-file=" + keyMountPath + "/" + herdgatev1alpha1.SecretHMACKey,
		},
		env: []*corev1ac.EnvVarApplyConfiguration{corev1ac.EnvVar().WithName("HERDGATE_REDIS_URL").WithValueFrom(
			corev1ac.EnvVarSource().WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(wq.SecretName()).WithKey(herdgatev1alpha1.SecretRedisURL)))},
		secret:     corev1ac.SecretVolumeSource().WithSecretName(wq.SecretName()).WithItems(items...),
		configHash: configHash(redisURL, image, refKeys),
		role: rbacv1ac.PolicyRule().WithAPIGroups(herdgatev1alpha1.GroupVersion.Group).WithResources("waitingqueues").
			WithResourceNames(wq.Name).WithVerbs("get", "list", "watch"),
		serviceName: wq.ServiceName(),
		gateway:     wq.Spec.EffectiveEnforcement() == herdgatev1alpha1.EnforcementGateway,
	}
}

func (w proxyWorkload) serviceAccount() *corev1ac.ServiceAccountApplyConfiguration {
	return corev1ac.ServiceAccount(w.name, w.namespace).
		WithLabels(w.labels).
		WithOwnerReferences(w.owners...).
		WithAutomountServiceAccountToken(true)
}

// roleConfig lets the proxy read its WaitingQueues, and nothing else: its keys come mounted.
func (w proxyWorkload) roleConfig() *rbacv1ac.RoleApplyConfiguration {
	return rbacv1ac.Role(w.name, w.namespace).
		WithLabels(w.labels).
		WithOwnerReferences(w.owners...).
		WithRules(w.role)
}

func (w proxyWorkload) roleBinding() *rbacv1ac.RoleBindingApplyConfiguration {
	return rbacv1ac.RoleBinding(w.name, w.namespace).
		WithLabels(w.labels).
		WithOwnerReferences(w.owners...).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(w.name)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(w.name).WithNamespace(w.namespace))
}

// configHash hashes what the proxy reads only at start.
func configHash(redisURL, image string, refKeys []string) string {
	h := sha256.New()
	for _, part := range append([]string{redisURL, image}, refKeys...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (w proxyWorkload) deployment(image string) *appsv1ac.DeploymentApplyConfiguration {
	probe := func(path string, period int32) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString("http"))).
			WithPeriodSeconds(period).WithTimeoutSeconds(2).WithFailureThreshold(3)
	}
	args := append(append([]string(nil), w.args...), "--listen=:8080", "--metrics-listen=:9090")
	ports := []*corev1ac.ContainerPortApplyConfiguration{
		corev1ac.ContainerPort().WithName("http").WithContainerPort(ProxyHTTPPort).WithProtocol(corev1.ProtocolTCP),
		corev1ac.ContainerPort().WithName("metrics").WithContainerPort(ProxyMetricsPort).WithProtocol(corev1.ProtocolTCP),
	}
	if w.gateway {
		args = append(args, fmt.Sprintf("--ext-authz-listen=:%d", ProxyExtAuthzPort))
		ports = append(ports, corev1ac.ContainerPort().WithName("ext-authz").WithContainerPort(ProxyExtAuthzPort).WithProtocol(corev1.ProtocolTCP))
	}
	container := corev1ac.Container().
		WithName("proxy").
		WithImage(image).
		// One image carries both binaries; its entrypoint is the manager.
		WithCommand("/herdgate-proxy").
		WithArgs(args...).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("secret").WithMountPath(keyMountPath).WithReadOnly(true)).
		WithEnv(w.env...).
		WithPorts(ports...).
		WithReadinessProbe(probe("/.herdgate/readyz", 5)).
		WithLivenessProbe(probe("/.herdgate/healthz", 10)).
		WithResources(w.resources).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))

	spec := appsv1ac.DeploymentSpec()
	if w.autoscaling == nil {
		// With an autoscaler the count is its own: an applied count would undo its every choice.
		spec.WithReplicas(w.replicas)
	}
	return appsv1ac.Deployment(w.name, w.namespace).
		WithLabels(w.labels).
		WithOwnerReferences(w.owners...).
		WithSpec(spec.
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(w.selector)).
			// A rollout adds a ready pod before it takes one away: the gate never serves on fewer replicas.
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(0)).
					WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(w.labels).
				WithAnnotations(map[string]string{ConfigHashAnnotation: w.configHash}).
				WithSpec(corev1ac.PodSpec().
					WithServiceAccountName(w.name).
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithRunAsUser(proxyUID).
						WithRunAsGroup(proxyUID).
						WithFSGroup(proxyUID).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					// The proxy drains for up to 25 s on SIGTERM.
					WithTerminationGracePeriodSeconds(30).
					// Replicas on different nodes and zones where the cluster has them; one node still
					// runs them all.
					WithTopologySpreadConstraints(
						spreadOver("kubernetes.io/hostname", w.selector),
						spreadOver("topology.kubernetes.io/zone", w.selector)).
					WithVolumes(corev1ac.Volume().WithName("secret").WithSecret(w.secret.WithDefaultMode(0o440))).
					WithContainers(container))))
}

func spreadOver(topologyKey string, selector map[string]string) *corev1ac.TopologySpreadConstraintApplyConfiguration {
	return corev1ac.TopologySpreadConstraint().
		WithTopologyKey(topologyKey).
		WithMaxSkew(1).
		WithWhenUnsatisfiable(corev1.ScheduleAnyway).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selector))
}

// minReplicas is the fewest proxy pods w runs: its replicas, or its autoscaler's minimum.
func (w proxyWorkload) minReplicas() int32 {
	if w.autoscaling != nil {
		return *w.autoscaling.MinReplicas
	}
	return w.replicas
}

// autoscaler scales the proxy Deployment on its pods' CPU, between the spec's bounds.
func (w proxyWorkload) autoscaler() *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration {
	a := w.autoscaling
	return autoscalingv2ac.HorizontalPodAutoscaler(w.name, w.namespace).
		WithLabels(w.labels).
		WithOwnerReferences(w.owners...).
		WithSpec(autoscalingv2ac.HorizontalPodAutoscalerSpec().
			WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
				WithAPIVersion("apps/v1").WithKind("Deployment").WithName(w.name)).
			WithMinReplicas(*a.MinReplicas).
			WithMaxReplicas(a.MaxReplicas).
			WithMetrics(autoscalingv2ac.MetricSpec().
				WithType(autoscalingv2.ResourceMetricSourceType).
				WithResource(autoscalingv2ac.ResourceMetricSource().
					WithName(corev1.ResourceCPU).
					WithTarget(autoscalingv2ac.MetricTarget().
						WithType(autoscalingv2.UtilizationMetricType).
						WithAverageUtilization(*a.TargetCPUUtilizationPercentage)))))
}

// disruptionBudget keeps all but one proxy pod through a voluntary disruption (a node drain):
// the gate never goes down at once. With one replica there is nothing to keep, and a budget would
// block the drain, so the operator deletes it.
func (w proxyWorkload) disruptionBudget() *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(w.name, w.namespace).
		WithLabels(w.labels).
		WithOwnerReferences(w.owners...).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(w.selector)))
}

// proxyResources are the spec's resources, or modest defaults sized for a proxy that mostly waits on
// the network.
func proxyResources(wq *herdgatev1alpha1.WaitingQueue) *corev1ac.ResourceRequirementsApplyConfiguration {
	r := corev1ac.ResourceRequirements()
	if wq.Spec.Proxy != nil && wq.Spec.Proxy.Resources != nil {
		// settings.Derive checked every quantity with the schema: each parses, and cheaply.
		if requests, err := wq.Spec.Proxy.Resources.Requests.ResourceList(); err == nil && len(requests) > 0 {
			r.WithRequests(requests)
		}
		if limits, err := wq.Spec.Proxy.Resources.Limits.ResourceList(); err == nil && len(limits) > 0 {
			r.WithLimits(limits)
		}
		return r
	}
	return r.
		WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}).
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")})
}

// service is the proxy's Service; with spec.enforcement Gateway it also serves the gRPC check,
// marked h2c so that gateways speak HTTP/2 to it in cleartext.
func (w proxyWorkload) service() *corev1ac.ServiceApplyConfiguration {
	ports := []*corev1ac.ServicePortApplyConfiguration{
		corev1ac.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromString("http")).WithProtocol(corev1.ProtocolTCP),
		corev1ac.ServicePort().WithName("metrics").WithPort(ProxyMetricsPort).WithTargetPort(intstr.FromString("metrics")).WithProtocol(corev1.ProtocolTCP),
	}
	if w.gateway {
		ports = append(ports, corev1ac.ServicePort().WithName("ext-authz").WithPort(ProxyExtAuthzPort).
			WithTargetPort(intstr.FromString("ext-authz")).WithProtocol(corev1.ProtocolTCP).WithAppProtocol("kubernetes.io/h2c"))
	}
	return corev1ac.Service(w.serviceName, w.namespace).
		WithLabels(w.labels).
		WithOwnerReferences(w.owners...).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(w.selector).
			WithPorts(ports...))
}
