package main

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"
)

// TestEagerSlotsApart: idle pollers holding every polled slot leave the eager starts theirs,
// and each permit goes back to its own pool.
func TestEagerSlotsApart(t *testing.T) {
	s, err := newEagerSlotSupplier(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p1, err := s.ReserveSlot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveSlot(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Both polled slots are held (two pollers waiting): a third poll waits.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.ReserveSlot(short, nil); err == nil {
		t.Fatal("a third polled slot was granted out of 2")
	}
	e := s.TryReserveSlot(nil)
	if e == nil {
		t.Fatal("no eager slot while the pollers hold theirs")
	}
	if s.TryReserveSlot(nil) != nil {
		t.Fatal("a second eager slot was granted out of 1")
	}
	// An eager permit released frees an eager slot, not a polled one.
	s.release(e)
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := s.ReserveSlot(short2, nil); err == nil {
		t.Fatal("an eager release freed a polled slot")
	}
	if s.TryReserveSlot(nil) == nil {
		t.Fatal("the eager slot was not freed")
	}
	// A polled permit released frees a polled slot.
	s.release(p1)
	short3, cancel3 := context.WithTimeout(ctx, time.Second)
	defer cancel3()
	if _, err := s.ReserveSlot(short3, nil); err != nil {
		t.Fatalf("a polled release did not free a polled slot: %v", err)
	}
	if got := s.MaxSlots(); got != 3 {
		t.Fatalf("MaxSlots = %d, want 3", got)
	}
}

func TestTunerRejectsNoSyncs(t *testing.T) {
	if _, err := newTuner(0, 0); err == nil {
		t.Fatal("a tuner with no workflow task slots was built")
	}
	if _, err := newTuner(20, 100); err != nil {
		t.Fatal(err)
	}
}

// kindInfo is a reservation for a poll of one kind of queue.
type kindInfo struct {
	worker.SlotReservationInfo
	kind enumspb.TaskQueueKind
}

func (k kindInfo) TaskQueueKind() enumspb.TaskQueueKind { return k.kind }

// usedInfo marks a permit used.
type usedInfo struct {
	worker.SlotMarkUsedInfo
	p *worker.SlotPermit
}

func (u usedInfo) Permit() *worker.SlotPermit { return u.p }

// TestNormalPollsCapped: idle polls of the normal queue hold at most normalPollsInFlight
// polled slots, so sticky polls (and the tasks they bring) get the rest; a normal poll that
// brought a task gives its token back at once, and its slot when the task is done.
func TestNormalPollsCapped(t *testing.T) {
	s, err := newEagerSlotSupplier(normalPollsInFlight+2, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	normal, sticky := kindInfo{kind: enumspb.TASK_QUEUE_KIND_NORMAL}, kindInfo{kind: enumspb.TASK_QUEUE_KIND_STICKY}
	var polls []*worker.SlotPermit
	for i := 0; i < normalPollsInFlight; i++ {
		p, err := s.ReserveSlot(ctx, normal)
		if err != nil {
			t.Fatal(err)
		}
		polls = append(polls, p)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.ReserveSlot(short, normal); err == nil {
		t.Fatalf("a normal poll beyond %d was granted", normalPollsInFlight)
	}
	// The capped poll took no polled slot: both left go to sticky polls.
	for i := 0; i < 2; i++ {
		if _, err := s.ReserveSlot(ctx, sticky); err != nil {
			t.Fatal(err)
		}
	}
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := s.ReserveSlot(short2, sticky); err == nil {
		t.Fatal("a sticky poll was granted a slot beyond the pool")
	}
	// A normal poll brings a task: its token goes back, but its slot stays held while the task
	// runs, so another normal poll waits for a slot, not for a token.
	s.MarkSlotUsed(usedInfo{p: polls[0]})
	s.MarkSlotUsed(usedInfo{p: polls[0]}) // twice: one token only
	short3, cancel3 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel3()
	if _, err := s.ReserveSlot(short3, normal); err == nil {
		t.Fatal("a poll was granted a slot still held by a running task")
	}
	if !s.normal.TryAcquire(1) {
		t.Fatal("the normal-poll token did not go back when the poll brought a task")
	}
	if s.normal.TryAcquire(1) {
		t.Fatal("marking one permit used twice gave back two tokens")
	}
	s.normal.Release(1)
	// The task done: the slot is back, and a normal poll gets it.
	s.release(polls[0])
	if _, err := s.ReserveSlot(ctx, normal); err != nil {
		t.Fatal(err)
	}
	// A poll that comes back empty gives back both its token and its slot.
	s.release(polls[1])
	short4, cancel4 := context.WithTimeout(ctx, time.Second)
	defer cancel4()
	if _, err := s.ReserveSlot(short4, normal); err != nil {
		t.Fatalf("an empty normal poll did not give back its token and slot: %v", err)
	}
}
