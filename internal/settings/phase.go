package settings

// Phase is where a room stands, as a visitor is told it (the JSON contract's "phase", the waiting
// page's) and as the scheduler publishes it: the schedule's phases, and the mode's. A room without a
// schedule in Queue mode is always Open. The WaitingQueue's condition reasons name the same phases.
type Phase string

// The schedule's phases, in order, then the mode's.
const (
	// PhaseScheduled: before the pre-queue; protected routes are closed to visitors without a pass.
	PhaseScheduled Phase = "Scheduled"
	// PhasePreQueue: visitors take pre-queue places, with no position yet.
	PhasePreQueue Phase = "PreQueue"
	// PhaseOpening: opened; the scheduler is drawing the pre-queue's order into the queue.
	PhaseOpening Phase = "Opening"
	// PhaseOpen: visitors queue and are admitted.
	PhaseOpen Phase = "Open"
	// PhaseClosed: after closesAt, or in Closed mode; no new visitor enters.
	PhaseClosed Phase = "Closed"
	// PhasePassthrough: in Passthrough mode; every request goes through without a pass.
	PhasePassthrough Phase = "Passthrough"
)

// Phases are every phase, in the order the waiting page lists its texts.
var Phases = []Phase{PhaseOpen, PhaseClosed, PhasePassthrough, PhaseScheduled, PhasePreQueue, PhaseOpening}

// Before reports whether the room in phase p has not opened yet: Scheduled or PreQueue.
func (p Phase) Before() bool { return p == PhaseScheduled || p == PhasePreQueue }
