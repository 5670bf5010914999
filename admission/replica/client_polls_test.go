package replica

import (
	"net/netip"
	"testing"
	"time"
)

func TestClientPollsBoundEachClientApart(t *testing.T) {
	var c ClientPolls
	flood, other := netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("203.0.113.9/32")
	at := time.Unix(1_700_000_000, 0)
	if _, ok := c.Allow(flood, at); !ok {
		t.Fatal("without a rate nothing is refused")
	}
	c.SetRate(10)
	allowed := 0
	// One second of a client polling every millisecond: its burst of 20 and 10 more.
	for i := range 1000 {
		if _, ok := c.Allow(flood, at.Add(time.Duration(i)*time.Millisecond)); ok {
			allowed++
		}
	}
	if allowed < 29 || allowed > 31 {
		t.Errorf("a client polling every millisecond for a second was let through %d times; want its burst of 20 and 10 more", allowed)
	}
	c.Allow(flood, at.Add(time.Second))
	retry, ok := c.Allow(flood, at.Add(time.Second))
	if ok || retry <= 0 || retry > 100*time.Millisecond {
		t.Errorf("past its rate: ok %v, retry %v; want a refusal that says to come back within 100 ms", ok, retry)
	}
	if _, ok := c.Allow(other, at.Add(time.Second)); !ok {
		t.Error("another client was refused for the first one's polls")
	}
	// After two quiet seconds the bucket is full again.
	for i := range 20 {
		if _, ok := c.Allow(flood, at.Add(3*time.Second)); !ok {
			t.Fatalf("poll %d of a burst after two quiet seconds was refused", i)
		}
	}
}

func TestClientPollsStayBounded(t *testing.T) {
	var c ClientPolls
	c.SetRate(1)
	at := time.Unix(1_700_000_000, 0)
	for i := range 10 * clientPollShards * clientPollsPerShard {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		c.Allow(netip.PrefixFrom(a, 32), at)
	}
	if got, most := c.Len(), 2*clientPollShards*clientPollsPerShard; got > most {
		t.Errorf("remembers %d clients, want at most %d", got, most)
	}
}
