package v1alpha1

// The objects the operator runs for a WaitingQueue are named after it; the admission proxy finds its
// Secret by the same rule.

// SecretName is the per-queue Secret that holds the HMAC key and the Redis URL.
func (wq *WaitingQueue) SecretName() string { return wq.Name + "-herdgate-secret" }

// ProxyName names the admission proxy's Deployment, ServiceAccount, Role and RoleBinding.
func (wq *WaitingQueue) ProxyName() string { return wq.Name + "-herdgate-proxy" }

// ServiceName is the Service that visitors reach the waiting room through.
func (wq *WaitingQueue) ServiceName() string { return wq.Name + "-herdgate" }

// Keys of the per-queue Secret.
const (
	// SecretHMACKey holds the 32-byte key that signs passes and visitor cookies.
	SecretHMACKey = "hmac-key"
	// SecretRedisURL holds the Redis URL the proxy connects to.
	SecretRedisURL = "redis-url"
	// SecretDrawSeed holds the 32-byte seed that draws the pre-queue at opening (spec.schedule),
	// secret until the draw begins; the proxy never mounts it.
	SecretDrawSeed = "draw-seed"
	// SecretDrawSeedFor holds the opensAt, in RFC 3339, the seed is for.
	SecretDrawSeedFor = "draw-seed-opens-at"
)
