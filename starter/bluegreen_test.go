package main

import (
	"strings"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/contract"
)

func TestRenderBlueGreen(t *testing.T) {
	until := time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC)
	tests := []struct {
		name string
		give contract.BlueGreenStatus
		want []string
	}{
		{
			name: "paused",
			give: contract.BlueGreenStatus{Phase: contract.BlueGreenPaused, Hash: "b", StableHash: "a", WaitingFor: contract.WaitingForPromote,
				Message:           "Blue-green: preview ready, paused until promoted",
				BlueGreenServices: contract.BlueGreenServices{Active: "web", ActiveSelects: "a", Preview: "web-preview", PreviewSelects: "b"}},
			want: []string{
				"Blue-green:          Paused, template b (stable a)",
				"Waiting for:         Promote (starter promote shop/web)",
				"Blue-green message:  Blue-green: preview ready, paused until promoted",
				"Active Service:      web → pod-template-hash a",
				"Preview Service:     web-preview → pod-template-hash b",
			},
		},
		{
			name: "scale-down delay",
			give: contract.BlueGreenStatus{Phase: contract.BlueGreenScaleDownDelay, Hash: "b", StableHash: "a", WaitingFor: contract.WaitingForTimer, Until: &until, Promoted: true,
				BlueGreenServices: contract.BlueGreenServices{Active: "web", ActiveSelects: "b"}},
			want: []string{
				"Blue-green:          ScaleDownDelay (promoted), template b (stable a)",
				"Waiting for:         Timer, until 2026-05-01T12:00:30Z",
			},
		},
		{
			name: "at rest",
			give: contract.BlueGreenStatus{BlueGreenServices: contract.BlueGreenServices{Active: "web", Preview: "web-preview", PreviewSelects: "a"}},
			want: []string{
				"Active Service:      web (no pod-template-hash selected yet)",
				"Preview Service:     web-preview → pod-template-hash a",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bg := tt.give
			got := renderStatus(contract.Status{Namespace: "shop", Name: "web", Phase: "Progressing", BlueGreen: &bg})
			// The column width is the widest key's: compare with single spaces.
			squeeze := func(s string) string {
				for strings.Contains(s, "  ") {
					s = strings.ReplaceAll(s, "  ", " ")
				}
				return s
			}
			for _, w := range tt.want {
				if !strings.Contains(squeeze(got), squeeze(w)) {
					t.Errorf("renderStatus =\n%s\nwant a line %q", got, w)
				}
			}
			if tt.give.Phase == "" && strings.Contains(got, "Blue-green:") {
				t.Errorf("at rest: %s\nwant no blue-green phase", got)
			}
		})
	}
}
