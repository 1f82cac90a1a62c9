package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/mocks"
)

func freezeValue(t *testing.T, f FleetFreezeResult) converter.EncodedValue {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(f)
	if err != nil {
		t.Fatal(err)
	}
	return client.NewValue(p)
}

func TestFleetFreeze(t *testing.T) {
	until := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	frozen := FleetFreezeResult{Frozen: true, Until: until, Reason: "black friday", By: "ops"}
	tests := []struct {
		name    string
		give    func(t *testing.T) (converter.EncodedValue, error)
		want    FleetFreezeResult
		wantErr string
	}{
		{name: "frozen", give: func(t *testing.T) (converter.EncodedValue, error) { return freezeValue(t, frozen), nil }, want: frozen},
		{name: "no freeze workflow is no freeze", give: func(*testing.T) (converter.EncodedValue, error) {
			return nil, serviceerror.NewNotFound("workflow not found for ID: freeze/fleet")
		}},
		{name: "an error is returned", give: func(*testing.T) (converter.EncodedValue, error) {
			return nil, errors.New("connection refused")
		}, wantErr: "query freeze/fleet: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &mocks.Client{}
			v, err := tt.give(t)
			c.On("QueryWorkflow", mock.Anything, FleetFreezeID, "", QueryFleetFreeze).Return(v, err)
			a := &Activities{Freeze: &FreezeSource{Client: c}}
			got, err := a.FleetFreeze(context.Background())
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// An answer is kept for the TTL: many rollouts stepping at once cost one query.
func TestFleetFreezeCached(t *testing.T) {
	c := &mocks.Client{}
	c.On("QueryWorkflow", mock.Anything, FleetFreezeID, "", QueryFleetFreeze).Return(freezeValue(t, FleetFreezeResult{Frozen: true, Reason: "r"}), nil)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &FreezeSource{Client: c, TTL: 2 * time.Second, Now: func() time.Time { return now }}
	for _, step := range []time.Duration{0, time.Second, 500 * time.Millisecond, time.Second, 0} {
		now = now.Add(step)
		if f, err := src.Get(context.Background()); err != nil || !f.Frozen {
			t.Fatalf("got %+v, %v; want frozen", f, err)
		}
	}
	// t=0 asks, 1s and 1.5s are cached, 2.5s asks again, and 2.5s again is cached.
	c.AssertNumberOfCalls(t, "QueryWorkflow", 2)
	// A worker without a source knows of no freeze.
	if f, err := (&Activities{}).FleetFreeze(context.Background()); err != nil || f.Frozen {
		t.Errorf("without a FreezeSource: %+v, %v; want no freeze", f, err)
	}
}
