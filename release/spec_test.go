package release

import (
	"strings"
	"testing"
	"time"
)

const validYAML = `
name: web-1-27
change:
  images: {app: "nginx:1.27"}
targets:
  - {name: canary, namespace: shop, names: [web-canary]}
  - {name: rest, cluster: eu, namespace: shop, selector: "app=web,tier!=canary"}
waves:
  - name: canary
    targets: [canary]
    bake: 10m
    approval: {approvers: 2}
    analysis: {query: "sum(rate(errors[1m]))", max: 0.01, count: 3, interval: 30s}
  - {name: rest, targets: [rest], maxConcurrent: 5}
freeze:
  - {rrule: "FREQ=WEEKLY;BYDAY=FR;BYHOUR=16;BYMINUTE=0", duration: 64h, timeZone: Europe/Berlin, reason: weekend}
`

func TestParseValid(t *testing.T) {
	s, err := Parse([]byte(validYAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	if got, want := s.Waves[1].maxConcurrent(), 5; got != want {
		t.Errorf("maxConcurrent = %d, want %d", got, want)
	}
	if got, want := time.Duration(s.Waves[0].Bake), 10*time.Minute; got != want {
		t.Errorf("bake = %s, want %s", got, want)
	}
	if got, want := s.Waves[0].approvers(), 2; got != want {
		t.Errorf("approvers = %d, want %d", got, want)
	}
	// JSON is YAML too.
	js, err := Parse([]byte(`{"name":"x","change":{"patch":{"metadata":{"labels":{"v":"2"}}}},"targets":[{"name":"a","namespace":"ns","names":["d"]}],"waves":[{"name":"w","targets":["a"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.Validate(); err != nil {
		t.Errorf("JSON release: Validate() = %v, want nil", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"unknown field", "name: x\nwavez: []\n", `unknown field "wavez"`},
		{"not yaml", "name: [x\n", "read release file"},
		{"resume", "name: x\nresume: {}\n", "resume is the workflow's own state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.give))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestValidateNamesEveryProblem: one release with many problems; the error names each.
func TestValidateNamesEveryProblem(t *testing.T) {
	give := `
name: Bad_Name
change: {}
targets:
  - {name: a, namespace: shop, names: [web]}
  - {name: a, namespace: shop, names: [web]}
  - {name: b, namespace: "Shop", selector: "app in (", names: [x]}
  - {name: c, namespace: shop}
  - {name: unused, namespace: shop, names: [u]}
waves:
  - {name: one, targets: [a, b], bake: -1s, maxConcurrent: -2}
  - {name: one, targets: [a, nope], approval: {approvers: 11}}
  - {name: empty, targets: []}
  - {name: four, targets: [c], analysis: {query: "", count: 0}}
onFailure: explode
freeze:
  - {cron: "61 * * * *", duration: 1h}
  - {rrule: "FREQ=MONTHLY", duration: 0s, timeZone: Mars/Olympus}
  - {cron: "0 1 * * *", rrule: "FREQ=DAILY", duration: 1h}
clusterTimeout: -1s
`
	s, err := Parse([]byte(give))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want errors")
	}
	got := err.Error()
	for _, want := range []string{
		`name "Bad_Name"`,
		"change: neither images nor patch is set",
		`targets[1] (a): the name "a" is used twice`,
		"deployment shop/web is also in target group \"a\"",
		`targets[2] (b): namespace "Shop"`,
		`targets[2] (b): both names and selector are set`,
		`targets[3] (c): neither names nor selector is set`,
		`targets (unused): the group is in no wave`,
		`waves[0] (one): bake -1s is negative`,
		`waves[0] (one): maxConcurrent -2 is negative`,
		`waves[1] (one): the name "one" is used twice`,
		`waves[1] (one): target group "a" is also in wave 0 (one)`,
		`waves[1] (one): target group "nope" is not in targets`,
		`waves[1] (one): approval.approvers 11 is not between 1 and 10`,
		`waves[2] (empty): no targets; an empty wave changes nothing`,
		`waves[3] (four): analysis: query is empty`,
		`onFailure "explode" is neither`,
		`freeze[0]: cron "61 * * * *": minute: "61" is outside 0-59`,
		`freeze[1]: rrule "FREQ=MONTHLY": FREQ=MONTHLY: only DAILY and WEEKLY are supported`,
		`; duration 0s is not between 1m and`,
		`; timeZone "Mars/Olympus"`,
		`freeze[2]: both cron and rrule are set`,
		`clusterTimeout -1s is negative`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate() does not name %q; got:\n%s", want, got)
		}
	}
}

func TestValidateChange(t *testing.T) {
	base := func() Spec {
		s, _ := Parse([]byte(validYAML))
		return s
	}
	tests := []struct {
		name   string
		change Change
		want   string
	}{
		{"both", Change{Images: map[string]string{"app": "x:1"}, Patch: []byte(`{"a":1}`)}, "both images and patch are set"},
		{"patch not an object", Change{Patch: []byte(`[1]`)}, "is a non-empty object"},
		{"empty image", Change{Images: map[string]string{"app": " "}}, "change.images[app]: image \" \" is empty"},
		{"bad container", Change{Images: map[string]string{"App": "x:1"}}, `container name "App"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			s.Change = tt.change
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
