package queue

import "github.com/redis/go-redis/v9"

// newScript makes one of the engine's scripts: the shared helpers (common.lua) and then body. Under
// the keycheck build tag every script first checks that each key it touches was declared (see
// keycheck.go).
func newScript(body string) *redis.Script {
	return redis.NewScript(keyCheckLua + commonLua + body)
}
