//go:build !keycheck

package queue

// keyCheckLua is empty outside the keycheck build (keycheck.go).
const keyCheckLua = ""
