package k8s

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestParkUnparkRoundTrip(t *testing.T) {
	d := withFenceposts(webDeployment(10, "web:1"), "3", "2")
	d.Annotations[ManagedAnnotation] = "true"
	want := d.DeepCopy()
	if err := Park(d); err != nil {
		t.Fatalf("Park() = %v", err)
	}
	if !d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
		t.Fatalf("parked spec: paused %t, strategy %+v; want paused, bare Recreate", d.Spec.Paused, d.Spec.Strategy)
	}
	ps, parked, err := Parked(d)
	if err != nil || !parked || ps.Paused || ps.Strategy.RollingUpdate.MaxSurge.String() != "3" {
		t.Fatalf("Parked() = %+v, %t, %v; want the user's RollingUpdate 3/2", ps, parked, err)
	}
	if v := Effective(d); v.Spec.Paused || v.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Fatalf("Effective() spec = %+v, want the user's", v.Spec.Strategy)
	}
	if err := Unpark(d); err != nil {
		t.Fatalf("Unpark() = %v", err)
	}
	if !equality.Semantic.DeepEqual(d.Spec, want.Spec) || !equality.Semantic.DeepEqual(d.Annotations, want.Annotations) {
		t.Fatalf("after the round trip got %+v %v, want %+v %v", d.Spec.Strategy, d.Annotations, want.Spec.Strategy, want.Annotations)
	}
}

func TestParkTakesTheUsersChanges(t *testing.T) {
	d := webDeployment(10, "web:1")
	d.Spec.Paused = true
	if err := Park(d); err != nil {
		t.Fatal(err)
	}
	// kubectl rollout resume, then a strategy written over the parked one.
	d.Spec.Paused = false
	if !ParkedDrift(d) {
		t.Fatalf("ParkedDrift() = false after spec.paused was set false, want true")
	}
	if err := Park(d); err != nil {
		t.Fatal(err)
	}
	if ps, _, _ := Parked(d); ps.Paused {
		t.Fatalf("saved paused = true after the user's resume, want false")
	}
	d.Spec.Strategy = withFenceposts(webDeployment(10, "x"), "1", "0").Spec.Strategy
	if err := Unpark(d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Paused || d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "1" {
		t.Fatalf("unparked: paused %t, strategy %+v; want unpaused with the user's new maxSurge 1", d.Spec.Paused, d.Spec.Strategy.RollingUpdate)
	}
}

func TestCanPark(t *testing.T) {
	tests := []struct {
		name string
		give *appsv1.Deployment
		want string
	}{
		{"rolling 25%", webDeployment(10, "a"), ""},
		{"rolling surge 1", withFenceposts(webDeployment(10, "a"), "1", "0"), ""},
		{"rolling surge 1%", withFenceposts(webDeployment(10, "a"), "1%", "1"), ""},
		{"rolling surge 0", withFenceposts(webDeployment(10, "a"), "0", "1"), "maxSurge 0"},
		{"rolling surge 0%", withFenceposts(webDeployment(10, "a"), "0%", "1"), "maxSurge 0%"},
		{"recreate", useRecreate(webDeployment(10, "a")), "strategy Recreate"},
	}
	for _, tt := range tests {
		if got := CanPark(tt.give.Spec.Strategy, true); got != "" {
			t.Errorf("%s: CanPark(guard) = %q, want every strategy", tt.name, got)
		}
		t.Run(tt.name, func(t *testing.T) {
			got := CanPark(tt.give.Spec.Strategy, false)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("CanPark() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecideManagedEntry(t *testing.T) {
	plain := webDeployment(10, "web:1")
	optedIn := webDeployment(10, "web:1")
	optedIn.Annotations[ManagedAnnotation] = "true"
	recreate := useRecreate(webDeployment(10, "web:1"))
	recreate.Annotations[ManagedAnnotation] = "true"
	optedOut := webDeployment(10, "web:1")
	_ = Park(optedOut)
	resumed := webDeployment(10, "web:1")
	resumed.Annotations[ManagedAnnotation] = "true"
	_ = Park(resumed)
	resumed.Spec.Paused = false
	broken := webDeployment(10, "web:1")
	broken.Annotations[ManagedAnnotation] = "true"
	broken.Annotations[ParkedAnnotation] = "{"
	tests := []struct {
		name      string
		give      *appsv1.Deployment
		wantPhase Phase
		wantSteps string
	}{
		{"not opted in", plain, PhaseReleased, ""},
		{"opted in, not parked", optedIn, PhaseProgressing, "ParkDeployment"},
		{"opted in, Recreate", recreate, PhaseReleased, ""},
		{"opted out, parked", optedOut, PhaseProgressing, "ReleaseDeployment"},
		{"parked fields changed", resumed, PhaseProgressing, "ParkDeployment"},
		{"parked annotation unreadable", broken, PhaseInvalid, "RecordEvent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := decide(t, Snapshot{Deployment: tt.give}, Request{Managed: true})
			var kinds []string
			for _, s := range plan.Steps {
				kinds = append(kinds, string(s.Kind))
			}
			if plan.Phase != tt.wantPhase || strings.Join(kinds, ",") != tt.wantSteps {
				t.Fatalf("DecideManaged() = %s %v, want %s [%s]", plan.Phase, kinds, tt.wantPhase, tt.wantSteps)
			}
		})
	}
}

// managedSim is a parked Deployment and its ReplicaSets, driven by DecideManaged, with a
// ReplicaSet controller that makes one more pod of each ReplicaSet available per tick.
type managedSim struct {
	t       *testing.T
	d       *appsv1.Deployment
	rss     []*appsv1.ReplicaSet
	now     time.Time
	chain   bool
	rv      int
	uid     int
	canary  *Canary
	maxSum  int32
	minAvl  int32
	started bool
}

func newManagedSim(t *testing.T, d *appsv1.Deployment, chain bool) *managedSim {
	d.Annotations[ManagedAnnotation] = "true"
	s := &managedSim{t: t, d: d, now: planNow, chain: chain, minAvl: 1 << 30}
	// Revision 1, complete, as kube-controller-manager left it before the opt-in.
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "prod", UID: "rs-1", CreationTimestamp: ago(time.Hour),
			Labels:          map[string]string{"app": "web", hashKey: "h1"},
			Annotations:     map[string]string{RevisionAnnotation: "1", DesiredReplicasAnnotation: fmt.Sprint(*d.Spec.Replicas)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptrTo(*d.Spec.Replicas), Template: *d.Spec.Template.DeepCopy()},
	}
	rs.Spec.Template.Labels = map[string]string{"app": "web", hashKey: "h1"}
	rs.Status = appsv1.ReplicaSetStatus{Replicas: *d.Spec.Replicas, ReadyReplicas: *d.Spec.Replicas, AvailableReplicas: *d.Spec.Replicas}
	s.rss = []*appsv1.ReplicaSet{rs}
	d.Annotations[RevisionAnnotation] = "1"
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas,
		ReadyReplicas: *d.Spec.Replicas, AvailableReplicas: *d.Spec.Replicas}
	return s
}

func (s *managedSim) snapshot() Snapshot {
	return Snapshot{Deployment: s.d.DeepCopy(), ReplicaSets: s.rss}
}

// sync runs one managed sync and applies its steps, checking after each that the built-in
// controller's paused sync would write no ReplicaSet and that the bounds hold.
func (s *managedSim) sync() Plan {
	t := s.t
	t.Helper()
	plan, err := decideWith(s.snapshot(), Request{Managed: true, Canary: s.canary}, s.now, !s.chain)
	if err != nil {
		t.Fatalf("Decide() = %v", err)
	}
	for _, step := range plan.Steps {
		s.apply(step)
		if _, parked, _ := Parked(s.d); !parked {
			continue
		}
		builtin, err := decideFull(Snapshot{Deployment: s.d.DeepCopy(), ReplicaSets: s.rss}, Request{}, s.now, false, true)
		if err != nil {
			t.Fatalf("paused sync: %v", err)
		}
		if !KeepsParkedQuiet(builtin, s.rss) {
			t.Fatalf("after %s the built-in controller's paused sync writes: %s\n%s", step.Kind, kindsOf(builtin), s.describe())
		}
		s.checkBounds()
	}
	return plan
}

func kindsOf(p Plan) string {
	var out []string
	for _, st := range p.Steps {
		out = append(out, string(st.Kind))
	}
	return strings.Join(out, ",")
}

func (s *managedSim) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deployment replicas %d template %s\n", *s.d.Spec.Replicas, s.d.Spec.Template.Spec.Containers[0].Image)
	for _, rs := range s.rss {
		fmt.Fprintf(&b, "  %s spec %d available %d desired %q\n", rs.Name, *rs.Spec.Replicas, rs.Status.AvailableReplicas, rs.Annotations[DesiredReplicasAnnotation])
	}
	return b.String()
}

func (s *managedSim) checkBounds() {
	if !s.started {
		return
	}
	view := Effective(s.d)
	var sum, avl int32
	for _, rs := range s.rss {
		sum += *rs.Spec.Replicas
		avl += min(rs.Status.AvailableReplicas, *rs.Spec.Replicas)
	}
	s.maxSum, s.minAvl = max(s.maxSum, sum), min(s.minAvl, avl)
	if limit := replicas(view) + MaxSurge(view); sum > limit {
		s.t.Fatalf("Σ spec.replicas %d > replicas + maxSurge %d\n%s", sum, limit, s.describe())
	}
}

func (s *managedSim) apply(step Step) {
	s.rv++
	switch step.Kind {
	case StepPark:
		if err := Park(s.d); err != nil {
			s.t.Fatal(err)
		}
		s.d.Generation++
	case StepRelease:
		if err := Unpark(s.d); err != nil {
			s.t.Fatal(err)
		}
		s.d.Generation++
	case StepCreate:
		s.uid++
		rs := step.ReplicaSet.DeepCopy()
		rs.UID = types.UID(fmt.Sprintf("rs-new-%d", s.uid))
		rs.CreationTimestamp = metav1.NewTime(s.now)
		s.rss = append(s.rss, rs)
	case StepScaleUp, StepScaleDown, StepUpdateRS:
		for i, rs := range s.rss {
			if rs.Name == step.ReplicaSet.Name {
				if *rs.Spec.Replicas != step.FromReplicas {
					s.t.Fatalf("%s of %s from %d, but it is at %d", step.Kind, rs.Name, step.FromReplicas, *rs.Spec.Replicas)
				}
				c := rs.DeepCopy()
				c.Spec.Replicas = ptrTo(*step.ReplicaSet.Spec.Replicas)
				for k, v := range step.ReplicaSet.Annotations {
					c.Annotations[k] = v
				}
				s.rss[i] = c
			}
		}
	case StepUpdateStatus:
		s.d.Status = step.Deployment.Status
		s.d.Annotations[RevisionAnnotation] = step.Deployment.Annotations[RevisionAnnotation]
	case StepRollback:
		s.d.Spec.Template = step.Deployment.Spec.Template
		s.d.Annotations = step.Deployment.Annotations
		s.d.Spec.Paused, s.d.Spec.Strategy = step.Deployment.Spec.Paused, step.Deployment.Spec.Strategy
		s.d.Generation++
	case StepCleanup:
		var kept []*appsv1.ReplicaSet
		for _, rs := range s.rss {
			del := false
			for _, r := range step.Delete {
				del = del || r.Name == rs.Name
			}
			if !del {
				kept = append(kept, rs)
			}
		}
		s.rss = kept
	}
}

// tick is the ReplicaSet controller: pods go at once, new ones become available one a tick.
func (s *managedSim) tick() {
	s.now = s.now.Add(time.Second)
	for i, rs := range s.rss {
		c := rs.DeepCopy()
		n := *c.Spec.Replicas
		if c.Status.AvailableReplicas > n {
			c.Status.AvailableReplicas = n
		} else if c.Status.AvailableReplicas < n {
			c.Status.AvailableReplicas++
		}
		c.Status.Replicas, c.Status.ReadyReplicas = n, c.Status.AvailableReplicas
		c.Status.ObservedGeneration = c.Generation
		s.rss[i] = c
	}
}

// run syncs and ticks until the rollout is complete and the new ReplicaSet's desired-replicas
// is given back.
func (s *managedSim) run(limit int) {
	s.t.Helper()
	for i := 0; i < limit; i++ {
		plan := s.sync()
		if plan.Phase == PhaseComplete && len(plan.Steps) == 0 {
			view := Effective(s.d)
			newRS := FindNewReplicaSet(view, s.rss)
			if newRS == nil || WithheldOrDesired(newRS) != int(replicas(view)) {
				s.t.Fatalf("complete, but the new ReplicaSet's desired-replicas is not given back\n%s", s.describe())
			}
			return
		}
		s.tick()
	}
	s.t.Fatalf("not complete after %d syncs\n%s", limit, s.describe())
}

func (s *managedSim) setImage(image string) {
	s.d.Spec.Template.Spec.Containers[0].Image = image
	s.d.Generation++
	s.started = true
}

// TestManagedRolloutKeepsBuiltinQuiet walks whole rollouts in managed mode and fails on any
// state in which kube-controller-manager's paused sync would write a ReplicaSet.
func TestManagedRolloutKeepsBuiltinQuiet(t *testing.T) {
	fenceposts := []struct{ surge, unavailable string }{
		{"25%", "25%"}, {"1", "0"}, {"1", "1"}, {"3", "2"}, {"100%", "0"}, {"1", "100%"},
	}
	for _, fp := range fenceposts {
		for _, chain := range []bool{true, false} {
			t.Run(fmt.Sprintf("surge %s unavailable %s chain %t", fp.surge, fp.unavailable, chain), func(t *testing.T) {
				s := newManagedSim(t, withFenceposts(webDeployment(10, "web:1"), fp.surge, fp.unavailable), chain)
				if plan := s.sync(); kindsOf(plan) != "ParkDeployment" {
					t.Fatalf("first sync = %s, want ParkDeployment", kindsOf(plan))
				}
				s.run(10) // parked, nothing to roll
				s.setImage("web:2")
				s.run(200)
				if got := len(filterActive(s.rss)); got != 1 {
					t.Fatalf("%d active ReplicaSets at the end, want 1\n%s", got, s.describe())
				}
				// Proportional scaling mid-rollout, then a rollback mid-rollout.
				s.setImage("web:3")
				s.sync()
				s.tick()
				s.sync()
				s.d.Spec.Replicas = ptrTo(int32(20))
				s.d.Generation++
				s.sync()
				s.tick()
				s.sync()
				rev := int64(0)
				plan, err := decideWith(s.snapshot(), Request{Managed: true, RollbackTo: &rev}, s.now, !s.chain)
				if err != nil {
					t.Fatal(err)
				}
				for _, step := range plan.Steps {
					s.apply(step)
				}
				if !s.d.Spec.Paused || s.d.Annotations[ManagedAnnotation] != "true" {
					t.Fatalf("after the rollback: paused %t, annotations %v; want parked and still opted in", s.d.Spec.Paused, s.d.Annotations)
				}
				if img := s.d.Spec.Template.Spec.Containers[0].Image; img != "web:2" {
					t.Fatalf("rolled back to %s, want web:2", img)
				}
				s.run(300)
				// Opt out at rest: handed back exactly as the user wrote it.
				delete(s.d.Annotations, ManagedAnnotation)
				if plan := s.sync(); kindsOf(plan) != "ReleaseDeployment" {
					t.Fatalf("sync after opt-out = %s, want ReleaseDeployment", kindsOf(plan))
				}
				if s.d.Spec.Paused || s.d.Spec.Strategy.RollingUpdate == nil || s.d.Spec.Strategy.RollingUpdate.MaxSurge.String() != fp.surge {
					t.Fatalf("released spec: paused %t strategy %+v, want the user's", s.d.Spec.Paused, s.d.Spec.Strategy)
				}
			})
		}
	}
}

// TestManagedCanaryStepHolds: a 50% step holds with both ReplicaSets at 5 and the built-in
// controller quiet.
func TestManagedCanaryStepHolds(t *testing.T) {
	s := newManagedSim(t, webDeployment(10, "web:1"), true)
	s.sync()
	s.setImage("web:2")
	view := Effective(s.d)
	s.canary = &Canary{Hash: PodTemplateHash(&view.Spec.Template, nil), Weight: 50}
	reached := false
	for i := 0; i < 50 && !reached; i++ {
		reached = s.sync().CanaryReached
		s.tick()
	}
	if !reached {
		t.Fatalf("the 50%% step was not reached\n%s", s.describe())
	}
	s.canary.Hold = true
	for i := 0; i < 5; i++ {
		s.sync()
		s.tick()
	}
	var sizes []int32
	for _, rs := range s.rss {
		sizes = append(sizes, *rs.Spec.Replicas)
	}
	if fmt.Sprint(sizes) != "[5 5]" {
		t.Fatalf("sizes at the 50%% step = %v, want [5 5]\n%s", sizes, s.describe())
	}
}

// TestManagedProgressDeadline: the workflow keeps the rollout's own Progressing condition
// (Plan.ManagedProgress) while the stored one is the paused sync's DeploymentPaused; past the
// deadline the plan is DeadlineExceeded and writes ProgressDeadlineExceeded, which the paused
// sync keeps; a rollback starts the clock again and DeploymentPaused comes back.
func TestManagedProgressDeadline(t *testing.T) {
	d := webDeployment(10, "web:1")
	d.Spec.ProgressDeadlineSeconds = ptrTo(int32(10))
	s := newManagedSim(t, d, true)
	s.sync()
	s.setImage("web:2")
	var mark *appsv1.DeploymentCondition
	var plan Plan
	for i := 0; i < 15; i++ {
		var err error
		plan, err = Decide(s.snapshot(), Request{Managed: true, ManagedProgress: mark}, s.now)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range plan.Steps {
			s.apply(step)
		}
		mark = plan.ManagedProgress
		if plan.Phase == PhaseDeadlineExceeded {
			break
		}
		// No pod of the new ReplicaSet ever becomes available.
		s.now = s.now.Add(time.Second)
	}
	if plan.Phase != PhaseDeadlineExceeded {
		t.Fatalf("phase after 15 s = %s, want DeadlineExceeded (mark %+v)", plan.Phase, mark)
	}
	if got := condition(s.d.Status); got != "False/"+TimedOutReason {
		t.Fatalf("stored Progressing = %s, want False/ProgressDeadlineExceeded", got)
	}
	builtin, err := decideFull(Snapshot{Deployment: s.d.DeepCopy(), ReplicaSets: s.rss}, Request{}, s.now, false, true)
	if err != nil || !KeepsParkedQuiet(builtin, s.rss) || condition(builtin.Status) != "False/"+TimedOutReason {
		t.Fatalf("the paused sync on it: %s, Progressing %s; want quiet and ProgressDeadlineExceeded kept", kindsOf(builtin), condition(builtin.Status))
	}
	rev := int64(0)
	plan, err = Decide(s.snapshot(), Request{Managed: true, ManagedProgress: mark, RollbackTo: &rev}, s.now)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range plan.Steps {
		s.apply(step)
	}
	mark = plan.ManagedProgress
	plan, err = Decide(s.snapshot(), Request{Managed: true, ManagedProgress: mark}, s.now)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range plan.Steps {
		s.apply(step)
	}
	if got := condition(s.d.Status); got != "Unknown/"+PausedDeployReason {
		t.Fatalf("stored Progressing after the rollback = %s, want Unknown/DeploymentPaused", got)
	}
}

func condition(st appsv1.DeploymentStatus) string {
	c := GetCondition(st, appsv1.DeploymentProgressing)
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason
}

// TestManagedGuardedStrategies: behind the ReplicaSet guard, maxSurge 0 and Recreate roll out
// to completion (the guard, not the plan, keeps the built-in controller from scaling).
func TestManagedGuardedStrategies(t *testing.T) {
	for _, d := range []*appsv1.Deployment{withFenceposts(webDeployment(4, "web:1"), "0", "1"), useRecreate(webDeployment(4, "web:1"))} {
		t.Run(string(d.Spec.Strategy.Type), func(t *testing.T) {
			d.Annotations[ManagedAnnotation] = "true"
			_ = Park(d)
			s := newManagedSim(t, d, true)
			s.setImage("web:2")
			for i := 0; i < 100; i++ {
				plan, err := Decide(s.snapshot(), Request{Managed: true, ManagedGuard: true}, s.now)
				if err != nil {
					t.Fatal(err)
				}
				for _, step := range plan.Steps {
					s.apply(step)
				}
				if plan.Phase == PhaseComplete && len(plan.Steps) == 0 {
					if got := len(filterActive(s.rss)); got != 1 {
						t.Fatalf("%d active ReplicaSets at the end\n%s", got, s.describe())
					}
					return
				}
				s.tick()
			}
			t.Fatalf("not complete\n%s", s.describe())
		})
	}
}

// TestDecideManagedIsDeterministic: the managed path (parked annotation JSON, the unparked
// view, the simulated paused sync) gives the same plan byte for byte on every run, as does
// Effective (workflowcheck exempts both; see workflowcheck.config.yaml).
func TestDecideManagedIsDeterministic(t *testing.T) {
	d := webDeployment(10, "nginx:1.2")
	d.Annotations[RevisionAnnotation] = "2"
	d.Annotations["a"], d.Annotations["b"], d.Annotations["c"] = "1", "2", "3"
	d.Annotations[ManagedAnnotation] = "true"
	d.Status = settledStatus(d, 10)
	if err := Park(d); err != nil {
		t.Fatal(err)
	}
	old1 := ownedRS(d, "nginx:1.0", 1, 4, 4, ago(2*time.Hour))
	old2 := ownedRS(d, "nginx:1.1", 2, 6, 6, ago(time.Hour))
	snap := Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{old1, old2}}
	req := Request{Managed: true}
	first, err := Decide(snap, req, planNow)
	if err != nil || len(first.Steps) == 0 {
		t.Fatalf("Decide() = %s, %v; want a rollout", kindsOf(first), err)
	}
	want, _ := json.Marshal(first)
	wantView, _ := json.Marshal(Effective(d))
	for i := range 200 {
		plan, err := Decide(snap, req, planNow)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(plan); string(got) != string(want) {
			t.Fatalf("run %d: plan = %s, want %s", i, got, want)
		}
		if got, _ := json.Marshal(Effective(d)); string(got) != string(wantView) {
			t.Fatalf("run %d: Effective = %s, want %s", i, got, wantView)
		}
	}
}
