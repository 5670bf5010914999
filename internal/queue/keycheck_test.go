//go:build keycheck

package queue

import (
	"context"
	"strings"
	"testing"
)

// TestTheKeyCheckRefusesWhatIsNotDeclared: under the keycheck build, a script that touches a key it
// did not declare, or runs a command the check does not know, fails; one that keeps to its keys runs.
// Without this, a key check that let everything through would pass every test.
func TestTheKeyCheckRefusesWhatIsNotDeclared(t *testing.T) {
	rdb := startClient(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, body, refusal string
	}{
		{"an undeclared key", "return redis.call('SET', KEYS[1] .. ':other', 1)", "SET on undeclared key {kc}:declared:other"},
		{"an undeclared key through pcall", "return redis.pcall('GET', 'elsewhere')", "GET on undeclared key elsewhere"},
		{"an undeclared second key of DEL", "return redis.call('DEL', KEYS[1], 'elsewhere')", "DEL on undeclared key elsewhere"},
		{"a command the check does not know", "return redis.call('LPUSH', KEYS[1], 1)", "LPUSH is not a command the key check knows"},
	} {
		err := newScript(c.body).Run(ctx, rdb, []string{"{kc}:declared"}).Err()
		if err == nil || !strings.Contains(err.Error(), "keycheck: "+c.refusal) {
			t.Errorf("%s: %v, want the key check's refusal %q", c.name, err, c.refusal)
		}
	}
	if err := newScript("redis.call('SET', KEYS[1], 1) return redis.call('GET', KEYS[1])").Run(ctx, rdb, []string{"{kc}:declared"}).Err(); err != nil {
		t.Errorf("a script keeping to its declared key: %v", err)
	}
}
