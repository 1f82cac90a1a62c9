package main

import (
	"context"
	"fmt"
	"sync/atomic"

	enumspb "go.temporal.io/api/enums/v1"
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
//
// Polls of the normal queue also take a token of their own (normal, normalPollsInFlight of
// them), held until the poll brings a task or comes back empty: the sticky queue's pollers are
// kept at workflowTaskPollers so a burst of signals is picked at once, and the SDK keeps its
// normal queue's pollers at the same minimum; without this cap their idle long polls would
// hold most of the polled slots.
type eagerSlotSupplier struct {
	polled, eager, normal *semaphore.Weighted
	polledN, eagerN       int
}

// eagerPermit marks a permit from the eager pool.
type eagerPermit struct{}

// normalPoll marks a permit taken for a poll of the normal queue; polling is set while it
// still holds its normal-poll token.
type normalPoll struct{ polling atomic.Bool }

// normalPollsInFlight: polls of the normal task queue at once per worker. Under a backlog a
// poll comes back within milliseconds, so a few keep up with what the slots can run.
const normalPollsInFlight = 4

func newEagerSlotSupplier(polled, eager int) (*eagerSlotSupplier, error) {
	if polled <= 0 || eager < 0 {
		return nil, fmt.Errorf("workflow task slots: %d polled and %d eager", polled, eager)
	}
	return &eagerSlotSupplier{
		polled: semaphore.NewWeighted(int64(polled)), eager: semaphore.NewWeighted(int64(eager)),
		normal:  semaphore.NewWeighted(normalPollsInFlight),
		polledN: polled, eagerN: eager,
	}, nil
}

// ReserveSlot is called before a poll. A poll of the normal queue first waits for a
// normal-poll token, so a poll held back by the cap holds no polled slot.
func (s *eagerSlotSupplier) ReserveSlot(ctx context.Context, info worker.SlotReservationInfo) (*worker.SlotPermit, error) {
	normal := info != nil && info.TaskQueueKind() == enumspb.TASK_QUEUE_KIND_NORMAL
	if normal {
		if err := s.normal.Acquire(ctx, 1); err != nil {
			return nil, err
		}
	}
	if err := s.polled.Acquire(ctx, 1); err != nil {
		if normal {
			s.normal.Release(1)
		}
		return nil, err
	}
	if normal {
		np := &normalPoll{}
		np.polling.Store(true)
		return &worker.SlotPermit{UserData: np}, nil
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

// MarkSlotUsed is called when a poll brought a task: a normal poll's token goes back, so the
// next poll of the normal queue can start while this task runs.
func (s *eagerSlotSupplier) MarkSlotUsed(info worker.SlotMarkUsedInfo) { s.pollDone(info.Permit()) }

func (s *eagerSlotSupplier) pollDone(p *worker.SlotPermit) {
	if np, ok := p.UserData.(*normalPoll); ok && np.polling.CompareAndSwap(true, false) {
		s.normal.Release(1)
	}
}

func (s *eagerSlotSupplier) ReleaseSlot(info worker.SlotReleaseInfo) { s.release(info.Permit()) }

func (s *eagerSlotSupplier) release(p *worker.SlotPermit) {
	if _, ok := p.UserData.(eagerPermit); ok {
		s.eager.Release(1)
		return
	}
	s.pollDone(p)
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
