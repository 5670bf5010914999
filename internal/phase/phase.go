// Package phase names where a room stands. The derivation of a spec (internal/settings) computes it,
// the scheduler publishes it through the Redis engine (internal/queue), and the proxy and the waiting
// page tell it to visitors; the package imports nothing so that each can share it.
package phase

// Phase is where a room stands, as a visitor is told it (the JSON contract's "phase", the waiting
// page's) and as the scheduler publishes it: the schedule's phases, and the mode's. A room without a
// schedule in Queue mode is always Open. The WaitingQueue's condition reasons name the same phases.
type Phase string

// The schedule's phases, in order, then the mode's.
const (
	// Scheduled: before the pre-queue; protected routes are closed to visitors without a pass.
	Scheduled Phase = "Scheduled"
	// PreQueue: visitors take pre-queue places, with no position yet.
	PreQueue Phase = "PreQueue"
	// Opening: opened; the scheduler is drawing the pre-queue's order into the queue.
	Opening Phase = "Opening"
	// Open: visitors queue and are admitted.
	Open Phase = "Open"
	// Closed: after closesAt, or in Closed mode; no new visitor enters.
	Closed Phase = "Closed"
	// Passthrough: in Passthrough mode; every request goes through without a pass.
	Passthrough Phase = "Passthrough"
)

// All are every phase, in the order the waiting page lists its texts.
var All = []Phase{Open, Closed, Passthrough, Scheduled, PreQueue, Opening}

// Before reports whether the room in phase p has not opened yet: Scheduled or PreQueue.
func (p Phase) Before() bool { return p == Scheduled || p == PreQueue }
