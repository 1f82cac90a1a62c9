package main

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/worker"
	"golang.org/x/sync/semaphore"
)

// eagerSlotSupplier hands out workflow-task slots from two pools: polled tasks (the pollers
// reserve a slot before each poll, so an idle poller holds one) share `polled` slots, and
// eager starts, whose first workflow task comes back inline in the start's response, take
// theirs from `eager` slots of their own.
//
// With one pool of 20 (--max-concurrent-syncs) and 16 pollers, the idle pollers held 16 of
// the 20, so an eager start found a slot only while at most 4 tasks ran: creating 1000
// Deployments at QPS 200, the first workflow task of most of them went through the task queue
// instead and was picked 10 s (median) after its start. Eager starts are paced already, by the
// watcher (Admission) on the client budget, so their own pool adds no unpaced syncs.
type eagerSlotSupplier struct {
	polled, eager   *semaphore.Weighted
	polledN, eagerN int
}

// eagerPermit marks a permit from the eager pool.
type eagerPermit struct{}

func newEagerSlotSupplier(polled, eager int) (*eagerSlotSupplier, error) {
	if polled <= 0 || eager < 0 {
		return nil, fmt.Errorf("workflow task slots: %d polled and %d eager", polled, eager)
	}
	return &eagerSlotSupplier{
		polled: semaphore.NewWeighted(int64(polled)), eager: semaphore.NewWeighted(int64(eager)),
		polledN: polled, eagerN: eager,
	}, nil
}

// ReserveSlot is called before a poll.
func (s *eagerSlotSupplier) ReserveSlot(ctx context.Context, _ worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	if err := s.polled.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	return &worker.SlotPermit{}, nil
}

// TryReserveSlot is called for an eager start (and never for anything else on workflow tasks).
func (s *eagerSlotSupplier) TryReserveSlot(worker.SlotReservationInfo) *worker.SlotPermit {
	if s.eager.TryAcquire(1) {
		return &worker.SlotPermit{UserData: eagerPermit{}}
	}
	return nil
}

func (s *eagerSlotSupplier) MarkSlotUsed(worker.SlotMarkUsedInfo) {}

func (s *eagerSlotSupplier) ReleaseSlot(info worker.SlotReleaseInfo) { s.release(info.Permit()) }

func (s *eagerSlotSupplier) release(p *worker.SlotPermit) {
	if _, ok := p.UserData.(eagerPermit); ok {
		s.eager.Release(1)
		return
	}
	s.polled.Release(1)
}

func (s *eagerSlotSupplier) MaxSlots() int { return s.polledN + s.eagerN }

// newTuner sizes the worker's task slots.
//
// Syncs write through one client rate limiter. Running only a bounded number at once
// (maxSyncs) keeps the rest waiting in the task queue, where waiting costs no history events,
// instead of inside workflow tasks, which would heartbeat and time out. Local waits for a
// rollout's next move (AwaitChange as a local activity) hold their workflow task open, so they
// get slots of their own on top of the syncs' (localWaitSlots). Eager starts get slots of their
// own too (eagerSlotSupplier), and each of these tasks a local activity slot.
//
// Each rollout under way holds one AwaitChange (a goroutine asleep on the informer cache), so
// the activity slots are many; they cost no API calls.
func newTuner(maxSyncs, localWaitSlots int) (worker.WorkerTuner, error) {
	eager := eagerStartsPerSync * maxSyncs
	wf, err := newEagerSlotSupplier(maxSyncs+localWaitSlots, eager)
	if err != nil {
		return nil, err
	}
	fixed := func(n int) worker.SlotSupplier {
		s, _ := worker.NewFixedSizeSlotSupplier(n)
		return s
	}
	return worker.NewCompositeTuner(worker.CompositeTunerOptions{
		WorkflowSlotSupplier:        wf,
		ActivitySlotSupplier:        fixed(activitySlots),
		LocalActivitySlotSupplier:   fixed(2*maxSyncs + localWaitSlots + eager),
		NexusSlotSupplier:           fixed(1),
		SessionActivitySlotSupplier: fixed(activitySlots),
	})
}

// activitySlots: AwaitChange activities at once per worker.
const activitySlots = 10000

// eagerStartsPerSync: eager starts' first workflow tasks that run at once, per sync slot
// (--max-concurrent-syncs). Creating 1000 Deployments at once at QPS 200, with the starts
// paced on the budget: create→available 24.2 s with 200 eager slots, 22.0 s with 100 (the
// built-in: 22.7 s); with 20, most starts found no slot free and their first task went through
// the task queue (38.6 s).
const eagerStartsPerSync = 5
