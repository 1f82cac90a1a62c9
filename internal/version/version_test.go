package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		ok     bool
		want   string
	}{
		{name: "set by -X", linked: "0.1.0", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-2025"}}, ok: true, want: "0.1.0"},
		{name: "module version", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, ok: true, want: "v0.1.0"},
		{name: "pseudo-version from VCS", bi: &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20250101000000-69db38f0a1b2+dirty"}}, ok: true, want: "v0.0.0-20250101000000-69db38f0a1b2+dirty"},
		{name: "devel build", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, ok: true, want: Dev},
		{name: "no build info", want: Dev},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolve(tt.linked, tt.bi, tt.ok); got != tt.want {
				t.Errorf("resolve() = %q, want %q", got, tt.want)
			}
		})
	}
}
