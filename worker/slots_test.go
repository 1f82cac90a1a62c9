package main

import (
	"context"
	"testing"
	"time"
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
