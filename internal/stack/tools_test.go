package stack

import (
	"path/filepath"
	"testing"
)

func TestDefaultTools(t *testing.T) {
	tests := []struct {
		name                   string
		tools, toolsCache, xdg string
		want                   string
	}{
		{name: "ROLLOUT_TOOLS", tools: "/a", toolsCache: "/b", xdg: "/c", want: "/a"},
		{name: "old name ROLLOUT_TOOLS_CACHE", toolsCache: "/b", xdg: "/c", want: "/b"},
		{name: "XDG_CACHE_HOME", xdg: "/c", want: filepath.Join("/c", "temporal-rollout", "tools")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ROLLOUT_TOOLS", tt.tools)
			t.Setenv("ROLLOUT_TOOLS_CACHE", tt.toolsCache)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			if got := DefaultTools(); got != tt.want {
				t.Errorf("DefaultTools() = %q, want %q", got, tt.want)
			}
		})
	}
}
