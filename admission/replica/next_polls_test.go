package replica

import (
	"strconv"
	"testing"
	"time"
)

func TestNextPollsRefuseAPollSoonerThanTold(t *testing.T) {
	var n NextPolls
	at := time.Unix(1_700_000_000, 0)
	if _, early := n.Early("v1", at, time.Minute); early {
		t.Fatal("a visitor never told anything is not early: Redis checks it")
	}
	n.Told("v1", at, NextPoll{NotBefore: at.Add(800 * time.Millisecond), Allowed: 800 * time.Millisecond, Position: 12, Depth: 40})

	told, early := n.Early("v1", at.Add(300*time.Millisecond), time.Minute)
	if !early {
		t.Fatal("a poll 300 ms after an answer that allows one after 800 ms is early")
	}
	if told.Position != 12 || told.Depth != 40 {
		t.Errorf("the refusal tells %d of %d, want the place as last told, 12 of 40", told.Position, told.Depth)
	}
	// The early poll counts as a poll: the next is allowed 800 ms after it, not after the answer.
	if want := at.Add(1100 * time.Millisecond); !told.NotBefore.Equal(want) {
		t.Errorf("after an early poll the next is allowed from %v, want %v", told.NotBefore.Sub(at), want.Sub(at))
	}
	if _, early := n.Early("v1", at.Add(1000*time.Millisecond), time.Minute); !early {
		t.Error("a poll 1 s after the answer but 700 ms after an early poll is early")
	}
	if _, early := n.Early("v1", at.Add(2900*time.Millisecond), time.Minute); early {
		t.Error("a poll a whole allowed interval after the last early one is answered")
	}
	if _, early := n.Early("v2", at.Add(300*time.Millisecond), time.Minute); early {
		t.Error("another visitor's poll is not early because of v1's")
	}
	n.Forget("v1")
	if _, early := n.Early("v1", at.Add(2950*time.Millisecond), time.Minute); early {
		t.Error("a forgotten visitor is Redis's to check")
	}
}

func TestNextPollsLetAHastyVisitorReachRedisOnceAKeepAlive(t *testing.T) {
	var n NextPolls
	at := time.Unix(1_700_000_000, 0)
	keepAlive := 10 * time.Second
	n.Told("hasty", at, NextPoll{NotBefore: at.Add(400 * time.Millisecond), Allowed: 400 * time.Millisecond})
	reached := 0
	for now := at.Add(20 * time.Millisecond); now.Before(at.Add(35 * time.Second)); now = now.Add(20 * time.Millisecond) {
		if _, early := n.Early("hasty", now, keepAlive); !early {
			// Redis hears it, answers, and the replica remembers that answer.
			reached++
			n.Told("hasty", now, NextPoll{NotBefore: now.Add(400 * time.Millisecond), Allowed: 400 * time.Millisecond})
		}
	}
	// Polling every 20 ms it would never wait out 400 ms, yet Redis hears of it every keepAlive.
	if reached != 3 {
		t.Errorf("a visitor polling every 20 ms for 35 s reached Redis %d times; want 3, once every %v", reached, keepAlive)
	}
}

func TestNextPollsAVisitorPollingAsToldIsNeverEarly(t *testing.T) {
	var n NextPolls
	at := time.Unix(1_700_000_000, 0)
	interval := 2 * time.Second
	for i := range 50 {
		// Told to come back after interval, at the earliest 80 % of it: it comes back as told.
		now := at.Add(time.Duration(i) * interval)
		if _, early := n.Early("v", now, time.Minute); early {
			t.Fatalf("poll %d, timed as told, was refused", i)
		}
		n.Told("v", now, NextPoll{NotBefore: now.Add(interval * 8 / 10), Allowed: interval * 8 / 10})
	}
}

func TestNextPollsStayBounded(t *testing.T) {
	var n NextPolls
	at := time.Unix(1_700_000_000, 0)
	for i := range 10 * nextPollShards * nextPollsPerShard {
		n.Told("visitor-"+strconv.Itoa(i), at, NextPoll{NotBefore: at.Add(time.Second), Allowed: time.Second})
	}
	if got, most := n.Len(), 2*nextPollShards*nextPollsPerShard; got > most {
		t.Errorf("remembers %d visitors, want at most %d", got, most)
	}
	// The latest are remembered: their early polls are refused in memory.
	last := "visitor-" + strconv.Itoa(10*nextPollShards*nextPollsPerShard-1)
	if _, early := n.Early(last, at.Add(time.Millisecond), time.Minute); !early {
		t.Error("the visitor told last was forgotten")
	}
}

func TestNextPollsForgetAVisitorTwoGenerationsOn(t *testing.T) {
	var s nextPollShard
	at := time.Unix(1_700_000_000, 0)
	told := NextPoll{NotBefore: at.Add(time.Hour), Allowed: time.Second}
	s.put("a", at, told)
	s.put("b", at.Add(nextPollGeneration), told)
	if _, ok := s.told.previous["a"]; !ok {
		t.Fatal("a generation later, a is in the previous one")
	}
	s.put("c", at.Add(2*nextPollGeneration), told)
	if _, ok := s.told.previous["a"]; ok {
		t.Error("two generations later, a is still remembered")
	}
	if _, ok := s.told.current["a"]; ok {
		t.Error("two generations later, a is still remembered")
	}
}
