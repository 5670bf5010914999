package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// The objects the operator runs for a WaitingQueue are named after it; the admission proxy finds its
// Secret by the same rule.

// SecretName is the per-queue Secret that holds the HMAC key and the Redis URL.
func (wq *WaitingQueue) SecretName() string { return wq.Name + "-herdgate-secret" }

// ProxyName names the admission proxy's Deployment, ServiceAccount, Role and RoleBinding.
func (wq *WaitingQueue) ProxyName() string { return wq.Name + "-herdgate-proxy" }

// ServiceName is the Service that visitors reach the waiting room through.
func (wq *WaitingQueue) ServiceName() string { return wq.Name + "-herdgate" }

// PassKeysName is the ConfigMap that publishes the public keys of the queue's JWT passes, and, for
// HS256 passes, the Secret that holds what gateways verify them with.
func (wq *WaitingQueue) PassKeysName() string { return wq.Name + "-herdgate-pass-keys" }

// SecretRefKey is the key of the per-queue Secret that holds the copy of the value a spec field
// refers to (a SecretValueRef): "ref-" and a hash of the Secret's name and key, which always makes a
// valid key of bounded length.
func SecretRefKey(name, key string) string {
	sum := sha256.Sum256([]byte(name + "/" + key))
	return SecretRefKeyPrefix + hex.EncodeToString(sum[:10])
}

// ConfigMapRefKey is the key of the per-queue Secret that holds the copy of a ConfigMap value the
// spec refers to (a ConfigMapValueRef), like SecretRefKey.
func ConfigMapRefKey(name, key string) string {
	sum := sha256.Sum256([]byte("configmap/" + name + "/" + key))
	return SecretRefKeyPrefix + hex.EncodeToString(sum[:10])
}

// SecretRefKeyPrefix starts every key of the per-queue Secret that SecretRefKey makes.
const SecretRefKeyPrefix = "ref-"

// Keys of the per-queue Secret.
const (
	// SecretHMACKey holds the 32-byte key that signs passes and visitor cookies.
	SecretHMACKey = "hmac-key"
	// SecretPassKeys holds the signing keys of the queue's JWT passes, private keys included, as
	// JSON: the current key, the next one and the retired ones still verifying.
	SecretPassKeys = "pass-keys"
	// SecretRedisURL holds the Redis URL the proxy connects to.
	SecretRedisURL = "redis-url"
	// SecretDrawSeed holds the 32-byte seed that draws the pre-queue at opening (spec.schedule),
	// secret until the draw begins; the proxy never mounts it.
	SecretDrawSeed = "draw-seed"
	// SecretDrawSeedFor holds the opensAt, in RFC 3339, the seed is for.
	SecretDrawSeedFor = "draw-seed-opens-at"
)

// ProxySetName names the Deployment, Service, ServiceAccount, Role, RoleBinding and Secret of the
// shared proxy set set (spec.proxy.shared).
func ProxySetName(set string) string { return "herdgate-set-" + set }

// ProxySetKey is the key of a shared proxy set's Secret that holds the copy of one room's value key:
// the room's name and the key, joined by "_", which no room name holds, so that no two rooms' keys
// meet and the set's proxies find each room's values in one mounted directory.
func ProxySetKey(room, key string) string { return room + "_" + key }

// ProxySet names the shared proxy set that serves the queue; "" when it has a proxy of its own.
func (s *WaitingQueueSpec) ProxySet() string {
	if s.Proxy == nil {
		return ""
	}
	return s.Proxy.Shared
}

// RoomID is a short name of the room namespace/name that stays the same wherever it is served:
// eight hex digits of a hash of it. It tells rooms apart where they share a host, in cookie names
// and in the room parameter of herdgate's own paths.
func RoomID(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:4])
}

// CookieName is the name of one of herdgate's cookies (base, such as "herdgate_pass") for the room
// namespace/name: base, '_' and the room's RoomID, so that rooms served on one domain never read or
// overwrite each other's cookies, and every name still starts with "herdgate_", which gateways strip
// before the workload.
func CookieName(base, namespace, name string) string { return base + "_" + RoomID(namespace, name) }

// CookieName is the name of one of herdgate's cookies for this room (see the function CookieName).
func (wq *WaitingQueue) CookieName(base string) string {
	return CookieName(base, wq.Namespace, wq.Name)
}
