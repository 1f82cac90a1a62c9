package release

import "testing"

func TestStartSummary(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[1].Approval = &Approval{Approvers: 1} })
	summary, details := StartSummary(spec)
	if want := "release web-1-27: images app=nginx:1.27 in 2 waves (first, second)"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}
	want := "- wave 1 first: one (shop: a); bake 10m0s\n" +
		"- wave 2 second: two (eu:shop: b, c); 1 approval\n\n" +
		"started by deployer@ci"
	if details != want {
		t.Errorf("details =\n%s\nwant\n%s", details, want)
	}
}
