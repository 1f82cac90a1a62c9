//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/k8s"
)

const waitTimeout = 3 * time.Minute

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%s-%04d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())), rand.IntN(10000))
	if len(name) > 60 {
		name = name[len(name)-60:]
		name = strings.TrimLeft(name, "-")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = env.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

type deployOpt func(*appsv1.Deployment)

func rolling(surge, unavailable string) deployOpt {
	return func(d *appsv1.Deployment) {
		s, u := intstr.Parse(surge), intstr.Parse(unavailable)
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}}
	}
}

func recreate() deployOpt {
	return func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
}

func progressDeadline(s int32) deployOpt {
	return func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = &s }
}

func historyLimit(n int32) deployOpt {
	return func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = &n }
}

func newDeployment(ns, name string, replicas int32, image string, opts ...deployOpt) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}},
					TerminationGracePeriodSeconds: new(int64)},
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

func create(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	got, err := env.kube.AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	return got
}

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := env.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get deployment %s/%s: %v", ns, name, err)
	}
	return d
}

// update applies f to the latest Deployment, retrying conflicts after a growing pause (the
// controller's own status writes race a read-modify-write while a rollout moves).
func update(t *testing.T, ns, name string, f func(*appsv1.Deployment)) *appsv1.Deployment {
	t.Helper()
	for i := range conflictTries {
		time.Sleep(conflictPause(i))
		d := getDeployment(t, ns, name)
		f(d)
		got, err := env.kube.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
		if err == nil {
			return got
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update deployment %s/%s: %v", ns, name, err)
		}
	}
	t.Fatalf("update deployment %s/%s: %d conflicts in a row", ns, name, conflictTries)
	return nil
}

// conflictTries is how many times update and updateIn try a write that conflicts.
const conflictTries = 15

// conflictPause is the wait before try i (from 0) of a write that conflicted: none before the
// first, then 10 ms more each time (1.05 s before the last).
func conflictPause(i int) time.Duration { return time.Duration(i) * 10 * time.Millisecond }

func setImage(t *testing.T, ns, name, image string) *appsv1.Deployment {
	t.Helper()
	return update(t, ns, name, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = image
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[k8s.ChangeCauseAnnotation] = "image " + image
	})
}

// eventually polls cond until it returns "" or the timeout passes, then fails with the last
// reason.
func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitComplete waits until `kubectl rollout status` would report success.
func waitComplete(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, waitTimeout, func() string {
		d = getDeployment(t, ns, name)
		return rolloutPending(d)
	})
	return d
}

func rolloutPending(d *appsv1.Deployment) string {
	want := *d.Spec.Replicas
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return fmt.Sprintf("observedGeneration %d < generation %d", st.ObservedGeneration, d.Generation)
	case st.UpdatedReplicas < want:
		return fmt.Sprintf("%d of %d updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return fmt.Sprintf("%d of %d updated available", st.AvailableReplicas, st.UpdatedReplicas)
	}
	if c := k8s.GetCondition(st, appsv1.DeploymentProgressing); c != nil && c.Reason != k8s.NewRSAvailableReason {
		return "progressing reason " + c.Reason
	}
	return ""
}

// replicaSets lists the Deployment's ReplicaSets, newest revision first.
func replicaSets(t *testing.T, ns string) []appsv1.ReplicaSet {
	t.Helper()
	list, err := env.kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list replicasets: %v", err)
	}
	rss := list.Items
	sort.Slice(rss, func(i, j int) bool {
		ri, _ := k8s.Revision(rss[i].Annotations)
		rj, _ := k8s.Revision(rss[j].Annotations)
		return ri > rj
	})
	return rss
}

// rsSummary renders "name:rev:replicas" per ReplicaSet, newest first.
func rsSummary(rss []appsv1.ReplicaSet) string {
	var parts []string
	for _, rs := range rss {
		parts = append(parts, fmt.Sprintf("%s:r%s:%d", rs.Name, rs.Annotations[k8s.RevisionAnnotation], *rs.Spec.Replicas))
	}
	return strings.Join(parts, " ")
}

func expectedRSName(d *appsv1.Deployment) string {
	return k8s.ReplicaSetName(d.Name, k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount))
}

// events returns "Reason: message" for the Deployment's events, oldest first.
func events(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",involvedObject.kind=Deployment"})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].FirstTimestamp.Before(&list.Items[j].FirstTimestamp) })
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func waitEvent(t *testing.T, ns, name, want string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		for _, e := range events(t, ns, name) {
			if strings.Contains(e, want) {
				return ""
			}
		}
		return fmt.Sprintf("no event %q among %q", want, events(t, ns, name))
	})
}

func condition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) string {
	c := k8s.GetCondition(d.Status, typ)
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s", c.Status, c.Reason)
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(stack.ToolPath(env.tools, "kubectl"), append([]string{"--kubeconfig", env.stack.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func temporalCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := temporalCLIErr(args...)
	if err != nil {
		t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func temporalCLIErr(args ...string) (string, error) {
	full := append(args, "--address", env.stack.TemporalAddress)
	cmd := exec.Command(stack.ToolPath(env.tools, "temporal"), full...)
	cmd.Env = append(os.Environ(), "TEMPORAL_CLI_SHOW_STACKS=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// observer watches a namespace's ReplicaSets and pods and records the worst breach of the
// rollout bounds: Σ spec.replicas > replicas + maxSurge, ready pods < replicas − maxUnavailable.
type observer struct {
	t        *testing.T
	ns       string
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	maxTotal int32
	minReady int32
	rs       map[string]int32
	ready    map[string]bool
	breaches []string
	// recreate: old and new pods must never coexist.
	recreateNew string
	podsByRS    map[string]map[string]bool
	worstTotal  int32
	worstReady  int32
}

func observe(t *testing.T, ns string, maxTotal, minReady int32) *observer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{t: t, ns: ns, cancel: cancel, done: make(chan struct{}), maxTotal: maxTotal, minReady: minReady,
		rs: map[string]int32{}, ready: map[string]bool{}, podsByRS: map[string]map[string]bool{}, worstReady: 1 << 30}
	// Seed the state from a list, then check every change the watch delivers after it.
	rsList, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list replicasets: %v", err)
	}
	for i := range rsList.Items {
		o.rs[rsList.Items[i].Name] = *rsList.Items[i].Spec.Replicas
	}
	podList, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for i := range podList.Items {
		p := &podList.Items[i]
		if p.DeletionTimestamp == nil && podReady(p) {
			o.ready[p.Name] = true
		}
		hash := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		if o.podsByRS[hash] == nil {
			o.podsByRS[hash] = map[string]bool{}
		}
		o.podsByRS[hash][p.Name] = true
	}
	rsw, err := env.kube.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rsList.ResourceVersion})
	if err != nil {
		t.Fatalf("watch replicasets: %v", err)
	}
	pw, err := env.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: podList.ResourceVersion})
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	go func() {
		defer close(o.done)
		for {
			select {
			case <-ctx.Done():
				rsw.Stop()
				pw.Stop()
				return
			case ev, ok := <-rsw.ResultChan():
				if !ok {
					return
				}
				if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok {
					o.onRS(ev.Type, rs)
				}
			case ev, ok := <-pw.ResultChan():
				if !ok {
					return
				}
				if p, ok := ev.Object.(*corev1.Pod); ok {
					o.onPod(ev.Type, p)
				}
			}
		}
	}()
	return o
}

func (o *observer) onRS(typ watch.EventType, rs *appsv1.ReplicaSet) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if typ == watch.Deleted {
		delete(o.rs, rs.Name)
	} else {
		o.rs[rs.Name] = *rs.Spec.Replicas
	}
	var total int32
	for _, n := range o.rs {
		total += n
	}
	o.worstTotal = max(o.worstTotal, total)
	if total > o.maxTotal {
		o.breaches = append(o.breaches, fmt.Sprintf("Σ spec.replicas = %d > %d (%v)", total, o.maxTotal, o.rs))
	}
}

func (o *observer) onPod(typ watch.EventType, p *corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	isReady := typ != watch.Deleted && p.DeletionTimestamp == nil && podReady(p)
	if isReady {
		o.ready[p.Name] = true
	} else {
		delete(o.ready, p.Name)
	}
	n := int32(len(o.ready))
	o.worstReady = min(o.worstReady, n)
	if n < o.minReady {
		o.breaches = append(o.breaches, fmt.Sprintf("ready pods = %d < %d", n, o.minReady))
	}
	// Pods of each ReplicaSet, by pod-template-hash, for the Recreate check.
	hash := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	if o.podsByRS[hash] == nil {
		o.podsByRS[hash] = map[string]bool{}
	}
	if typ == watch.Deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		delete(o.podsByRS[hash], p.Name)
	} else {
		o.podsByRS[hash][p.Name] = true
	}
	if o.recreateNew != "" && len(o.podsByRS[o.recreateNew]) > 0 {
		for h, pods := range o.podsByRS {
			if h != o.recreateNew && len(pods) > 0 {
				o.breaches = append(o.breaches, fmt.Sprintf("recreate: %d old pods (hash %s) coexist with new pods (hash %s)", len(pods), h, o.recreateNew))
			}
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stop ends the watch and fails the test on any breach.
func (o *observer) stop() {
	o.t.Helper()
	o.cancel()
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.breaches) > 0 {
		o.t.Errorf("rollout bounds breached %d times; first: %s", len(o.breaches), o.breaches[0])
	}
	o.t.Logf("bounds: worst Σ spec.replicas %d (max %d), worst ready %d (min %d)", o.worstTotal, o.maxTotal, o.worstReady, o.minReady)
}

var execCommand = exec.Command
