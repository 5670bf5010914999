//go:build keycheck

package queue

import _ "embed"

// Servers that run a script only on the keys it declares (Dragonfly, ElastiCache Serverless, a
// Redis Cluster proxy) refuse a script that touches any other. Built with the keycheck tag, every
// script starts by shadowing redis.call and redis.pcall with versions that refuse an undeclared key,
// so that running the engine's tests with the tag proves the scripts declare every key they touch
// (docs/guides/redis.md#managed-and-compatible-servers).
//
//go:embed lua/keycheck.lua
var keyCheckLua string
