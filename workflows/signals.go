package workflows

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// The signals' payloads, as the main loop reads them (addSignals, wait.go).

// receive takes the next value off a signal channel as raw JSON. It receives the payload
// undecoded, so a payload the data converter cannot decode (another codec, a proto) is taken
// off the channel and reported here instead of being dropped by the SDK while the receive
// blocks for the next signal, which would stall every sync, timer and signal behind it.
func receive(ctx workflow.Context, c workflow.ReceiveChannel) (json.RawMessage, error) {
	var v converter.RawValue
	c.Receive(ctx, &v)
	p := v.Payload()
	if p == nil {
		return nil, nil
	}
	switch enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc {
	case converter.MetadataEncodingJSON:
		return p.GetData(), nil
	case converter.MetadataEncodingNil:
		return nil, nil
	default:
		return nil, fmt.Errorf("payload encoding %q is not JSON (%d bytes)", enc, len(p.GetData()))
	}
}

// ParseTrigger reads the versions a trigger signal carries. Any other payload, or none, is a
// plain trigger.
func ParseTrigger(raw json.RawMessage) []k8s.ObjectVersion {
	var t contract.Trigger
	if len(raw) == 0 || json.Unmarshal(raw, &t) != nil {
		return nil
	}
	return t.Versions
}

// ParseRollback validates a rollback payload: an object with a non-negative integer
// "revision" and nothing else.
func ParseRollback(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, errors.New(`payload is empty; want {"revision": N}`)
	}
	var req contract.RollbackRequest
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return 0, fmt.Errorf(`payload %s is not {"revision": N}: %w`, string(raw), err)
	}
	if dec.More() {
		return 0, fmt.Errorf(`payload %s has data after {"revision": N}`, string(raw))
	}
	if req.Revision == nil {
		return 0, fmt.Errorf(`payload %s has no "revision"; want {"revision": N}`, string(raw))
	}
	if *req.Revision < 0 {
		return 0, fmt.Errorf("revision %d is negative", *req.Revision)
	}
	return *req.Revision, nil
}
