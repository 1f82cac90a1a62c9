//go:build e2e

package e2e

// Ports of k8s.io/kubernetes v1.36.3 test/integration/deployment tests, run against our worker
// and watcher on the real stack. Upstream's integration tests run no kubelet: pods are bound to
// a node ("fake-node") nobody runs, stay Pending until the test marks them Ready, and a graceful
// delete leaves them Terminating until the test deletes them again with grace 0. kwok would make
// pods Ready by itself and finish every deletion at once, so the tests that depend on that bind
// their pods to noKubeletNode instead. The deploymentTester below keeps upstream's helper names
// and semantics (test/integration/deployment/util.go and test/utils/deployment.go): in
// particular its waits read the status at once, without waiting for the controller first.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/temporal-rollout/rollout/k8s"
)

const (
	upstreamPollInterval = 100 * time.Millisecond
	upstreamPollTimeout  = 60 * time.Second
	upstreamImage        = "fakeimage"
)

// noKubeletNode registers a Node that neither a kubelet nor kwok runs, for pods bound to it by
// spec.nodeName: they stay Pending until the test marks them Ready, and a graceful delete leaves
// them Terminating until the test deletes them with grace 0, as in upstream's integration tests.
// The node is Ready and its lease is renewed, so the node lifecycle controller leaves its pods
// alone (it marks the pods of a NotReady node NotReady), and unschedulable, so the scheduler
// puts no other pod there. Cleanup deletes the namespace's Deployments and ReplicaSets, then
// the node's pods with grace 0, then the node.
func noKubeletNode(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("no-kubelet-%04d", rand.IntN(10000))
	now := metav1.Now()
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "e2e: no kubelet, the test plays it", LastHeartbeatTime: now, LastTransitionTime: now}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("2000")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "no-kubelet"}},
		Spec:       corev1.NodeSpec{Unschedulable: true},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}, Capacity: capacity, Allocatable: capacity},
	}
	got, err := env.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	if c := nodeCondition(got, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue {
		got.Status = node.Status
		if _, err := env.kube.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("set node %s Ready: %v", name, err)
		}
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: got.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if _, err := env.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node lease %s: %v", name, err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			l, err := env.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			_, _ = env.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
	t.Cleanup(func() {
		// Stop the controllers first, so no new pod lands on the node, then play the kubelet
		// once more: every pod of the node goes at once.
		_ = env.kube.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = env.kube.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		for range 50 {
			pods, err := env.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
			if err != nil || len(pods.Items) == 0 {
				break
			}
			for _, p := range pods.Items {
				_ = env.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			}
			time.Sleep(200 * time.Millisecond)
		}
		close(stop)
		<-done
		_ = env.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// upstreamClient is a client with upstream's integration-test limits (QPS 1000, burst 10000,
// as kube-apiserver's StartTestServer sets them): the e2e client's 100/200 would space the
// test's own writes (the deletes in particular) further apart than upstream's.
var upstreamClient = sync.OnceValues(func() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", env.stack.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 10000
	return kubernetes.NewForConfig(cfg)
})

// newTester returns upstream's deploymentTester for d, on upstreamClient.
func newTester(t *testing.T, d *appsv1.Deployment) *deploymentTester {
	t.Helper()
	c, err := upstreamClient()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &deploymentTester{t: t, c: c, deployment: d}
}

// deploymentTester is upstream's, on the e2e stack.
type deploymentTester struct {
	t          *testing.T
	c          kubernetes.Interface
	deployment *appsv1.Deployment
	// firstRead is the status the last waitForDeploymentComplete read first, for diagnostics.
	firstRead *appsv1.DeploymentStatus
}

// upstreamDeployment is upstream's newDeployment: a RollingUpdate Deployment with a fake image,
// its strategy parameters left to the defaults.
func upstreamDeployment(name, ns string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"name": "test"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: new(appsv1.RollingUpdateDeployment)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "fake-name", Image: upstreamImage}}},
			},
		},
	}
}

func (d *deploymentTester) create() {
	d.t.Helper()
	var err error
	d.deployment, err = d.c.AppsV1().Deployments(d.deployment.Namespace).Create(context.Background(), d.deployment, metav1.CreateOptions{})
	if err != nil {
		d.t.Fatalf("failed to create deployment %q: %v", d.deployment.Name, err)
	}
}

func markPodReady(c kubernetes.Interface, ns string, pod *corev1.Pod) error {
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	_, err := c.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
	return err
}

func (d *deploymentTester) deploymentComplete() (bool, error) {
	latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return k8s.DeploymentComplete(d.deployment, &latest.Status), nil
}

// markUpdatedPodsReady marks the new ReplicaSet's pods Ready until the Deployment is complete.
func (d *deploymentTester) markUpdatedPodsReady(wg *sync.WaitGroup) {
	defer wg.Done()
	ns := d.deployment.Namespace
	err := wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		if completed, err := d.deploymentComplete(); err != nil {
			return false, err
		} else if completed {
			return true, nil
		}
		pods, err := d.listUpdatedPods()
		if err != nil {
			return false, nil
		}
		for i := range pods {
			if podReady(&pods[i]) {
				continue
			}
			_ = markPodReady(d.c, ns, &pods[i])
		}
		return false, nil
	})
	if err != nil {
		d.t.Errorf("failed to mark updated Deployment pods to ready: %v", err)
	}
}

// removeTerminatedPods deletes the terminating pods of the Deployment's ReplicaSets with grace 0
// (what the kubelet does once containers stop) until the Deployment is complete.
func (d *deploymentTester) removeTerminatedPods(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	err := wait.PollUntilContextTimeout(ctx, upstreamPollInterval, upstreamPollTimeout, true, func(ctx context.Context) (bool, error) {
		if completed, err := d.deploymentComplete(); err != nil {
			return false, err
		} else if completed {
			return true, nil
		}
		rss, err := d.ownedReplicaSets()
		if err != nil {
			return false, nil
		}
		for _, rs := range rss {
			if err := d.removeRSPods(ctx, rs, math.MaxInt, true, 0); err != nil {
				return false, nil
			}
		}
		return false, nil
	})
	if err != nil {
		d.t.Errorf("failed to remove terminated Deployment pods: %v", err)
	}
}

// waitForDeploymentComplete is upstream's soft check: it reads the status at once and returns
// as soon as it shows the Deployment complete.
func (d *deploymentTester) waitForDeploymentComplete() error {
	var reason string
	d.firstRead = nil
	err := wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.firstRead == nil {
			d.firstRead = latest.Status.DeepCopy()
		}
		if k8s.DeploymentComplete(d.deployment, &latest.Status) {
			return true, nil
		}
		reason = fmt.Sprintf("deployment status: %+v", latest.Status)
		return false, nil
	})
	if wait.Interrupted(err) {
		err = fmt.Errorf("%s", reason)
	}
	if err != nil {
		return fmt.Errorf("error waiting for deployment %q status to match expectation: %v", d.deployment.Name, err)
	}
	return nil
}

func (d *deploymentTester) waitForDeploymentCompleteAndMarkPodsReady() error {
	var wg sync.WaitGroup
	wg.Add(1)
	go d.markUpdatedPodsReady(&wg)
	err := d.waitForDeploymentComplete()
	if err != nil {
		return fmt.Errorf("failed to wait for Deployment status %s: %v", d.deployment.Name, err)
	}
	wg.Wait()
	return nil
}

func (d *deploymentTester) waitForDeploymentCompleteAndMarkPodsReadyAndRemoveTerminated(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go d.markUpdatedPodsReady(&wg)
	go d.removeTerminatedPods(ctx, &wg)
	err := d.waitForDeploymentComplete()
	if err != nil {
		return fmt.Errorf("failed to wait for Deployment status %s: %w", d.deployment.Name, err)
	}
	wg.Wait()
	return nil
}

func (d *deploymentTester) updateDeployment(f func(*appsv1.Deployment)) *appsv1.Deployment {
	d.t.Helper()
	d.deployment = update(d.t, d.deployment.Namespace, d.deployment.Name, f)
	return d.deployment
}

func (d *deploymentTester) waitForObservedDeployment(desiredGeneration int64) error {
	return wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return latest.Status.ObservedGeneration >= desiredGeneration, nil
	})
}

func (d *deploymentTester) ownedReplicaSets() ([]*appsv1.ReplicaSet, error) {
	list, err := d.c.AppsV1().ReplicaSets(d.deployment.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ReplicaSet
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == d.deployment.UID {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// getNewReplicaSet is the owned ReplicaSet whose template equals the Deployment's, or nil.
func (d *deploymentTester) getNewReplicaSet() (*appsv1.ReplicaSet, error) {
	latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed retrieving deployment %s: %v", d.deployment.Name, err)
	}
	rss, err := d.ownedReplicaSets()
	if err != nil {
		return nil, fmt.Errorf("failed retrieving new replicaset of deployment %s: %v", d.deployment.Name, err)
	}
	return k8s.FindNewReplicaSet(latest, rss), nil
}

func (d *deploymentTester) expectNoNewReplicaSet() error {
	rs, err := d.getNewReplicaSet()
	if err != nil {
		return err
	}
	if rs != nil {
		return fmt.Errorf("expected deployment %s not to create a new replicaset, got %s at %d", d.deployment.Name, rs.Name, *rs.Spec.Replicas)
	}
	return nil
}

func (d *deploymentTester) expectNewReplicaSet() (*appsv1.ReplicaSet, error) {
	rs, err := d.getNewReplicaSet()
	if err != nil {
		return nil, err
	}
	if rs == nil {
		return nil, fmt.Errorf("expected deployment %s to create a new replicaset, got nil", d.deployment.Name)
	}
	return rs, nil
}

func (d *deploymentTester) listUpdatedPods() ([]corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(d.deployment.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := d.c.CoreV1().Pods(d.deployment.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	newRS, err := d.getNewReplicaSet()
	if err != nil {
		return nil, err
	}
	if newRS == nil {
		return nil, fmt.Errorf("unable to find new replicaset of deployment %q", d.deployment.Name)
	}
	var owned []corev1.Pod
	for _, pod := range pods.Items {
		if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == newRS.UID {
			owned = append(owned, pod)
		}
	}
	return owned, nil
}

// waitRSStable waits until the ReplicaSet has observed its generation and runs
// rs.Spec.Replicas pods.
func (d *deploymentTester) waitRSStable(rs *appsv1.ReplicaSet) error {
	return wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		got, err := d.c.AppsV1().ReplicaSets(rs.Namespace).Get(context.Background(), rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration >= got.Generation && got.Status.Replicas == *rs.Spec.Replicas, nil
	})
}

func (d *deploymentTester) waitForDeploymentUpdatedReplicasGTE(minUpdated int32) error {
	gen := d.deployment.Generation
	return wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return latest.Status.ObservedGeneration >= gen && latest.Status.UpdatedReplicas >= minUpdated, nil
	})
}

func (d *deploymentTester) waitForDeploymentWithCondition(reason string, condType appsv1.DeploymentConditionType) error {
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = condition(latest, condType)
		c := k8s.GetCondition(latest.Status, condType)
		return c != nil && c.Reason == reason, nil
	})
	if err != nil {
		return fmt.Errorf("deployment %q condition %s: want reason %s, last %s: %w", d.deployment.Name, condType, reason, last, err)
	}
	return nil
}

func (d *deploymentTester) waitForReadyReplicas() error {
	return wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return latest.Status.ReadyReplicas == *latest.Spec.Replicas, nil
	})
}

func (d *deploymentTester) markUpdatedPodsReadyWithoutComplete() error {
	return wait.PollUntilContextTimeout(context.Background(), upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		pods, err := d.listUpdatedPods()
		if err != nil {
			return false, err
		}
		for i := range pods {
			if podReady(&pods[i]) {
				continue
			}
			if err := markPodReady(d.c, d.deployment.Namespace, &pods[i]); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

func (d *deploymentTester) waitForDeploymentStatusReplicasFields(ctx context.Context, replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas int32, terminatingReplicas *int32) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, upstreamPollInterval, upstreamPollTimeout, true, func(context.Context) (bool, error) {
		lastErr = d.checkDeploymentStatusReplicasFields(replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas, terminatingReplicas)
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", lastErr, err)
	}
	return nil
}

func (d *deploymentTester) checkDeploymentStatusReplicasFields(replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas int32, terminatingReplicas *int32) error {
	latest, err := d.c.AppsV1().Deployments(d.deployment.Namespace).Get(context.Background(), d.deployment.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to get deployment %q: %v", d.deployment.Name, err)
	}
	st := latest.Status
	switch {
	case st.Replicas != replicas:
		return fmt.Errorf("unexpected .replicas: expect %d, got %d", replicas, st.Replicas)
	case st.UpdatedReplicas != updatedReplicas:
		return fmt.Errorf("unexpected .updatedReplicas: expect %d, got %d", updatedReplicas, st.UpdatedReplicas)
	case st.ReadyReplicas != readyReplicas:
		return fmt.Errorf("unexpected .readyReplicas: expect %d, got %d", readyReplicas, st.ReadyReplicas)
	case st.AvailableReplicas != availableReplicas:
		return fmt.Errorf("unexpected .availableReplicas: expect %d, got %d", availableReplicas, st.AvailableReplicas)
	case st.UnavailableReplicas != unavailableReplicas:
		return fmt.Errorf("unexpected .unavailableReplicas: expect %d, got %d", unavailableReplicas, st.UnavailableReplicas)
	case !ptr.Equal(st.TerminatingReplicas, terminatingReplicas):
		return fmt.Errorf("unexpected .terminatingReplicas: expect %v, got %v", ptr.Deref(terminatingReplicas, -1), ptr.Deref(st.TerminatingReplicas, -1))
	}
	return nil
}

// removeRSPods deletes up to count of the ReplicaSet's pods, in list order, with the grace
// period given; with targetOnlyTerminating only those already terminating.
func (d *deploymentTester) removeRSPods(ctx context.Context, rs *appsv1.ReplicaSet, count int, targetOnlyTerminating bool, gracePeriodSeconds int64) error {
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return fmt.Errorf("could not parse a selector for a replica set %q: %w", rs.Name, err)
	}
	pods, err := d.c.CoreV1().Pods(rs.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return fmt.Errorf("failed to get pods for a replica set %q: %w", rs.Name, err)
	}
	for i, pod := range pods.Items {
		if i >= count {
			break
		}
		if targetOnlyTerminating && pod.DeletionTimestamp == nil {
			continue
		}
		err := d.c.CoreV1().Pods(rs.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(gracePeriodSeconds)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("failed to delete pod %q for a replica set %q: %w", pod.Name, rs.Name, err)
		}
	}
	return nil
}

// TestUpstreamRollingUpdateAndProportionalScalingForPodReplacement ports upstream's
// TestRollingUpdateAndProportionalScalingForDeploymentPodReplacement, its
// DeploymentReplicaSetTerminatingReplicas=true case (the gate is Beta and on by default in
// v1.36, and our stack does not change it; the =false case needs it off in kube-apiserver and
// kube-controller-manager, so it is not ported). 100 replicas, maxSurge 20, maxUnavailable 0,
// pods with a 300 s grace period; 15 pods of the first ReplicaSet are deleted and sit
// Terminating. The test then at once waits for the Deployment to be complete (marking new pods
// Ready meanwhile): it trusts the status to show the deletions already. A status that still
// shows the Deployment complete ends that wait at once, nobody marks the 15 replacement pods
// Ready, and the next check fails on readyReplicas 85.
//
// Upstream runs it with every controller's client at QPS 1000 / burst 10000 (the integration
// test server's client config), and so does this port: at kube-controller-manager's default of
// QPS 20, its ReplicaSet controller, whose token bucket the 100-pod first rollout has drained,
// writes the ReplicaSet's status 190-270 ms after the first delete, after the test has read the
// Deployment; the built-in Deployment controller then fails it exactly as ours does (run with
// E2E_CONTROLLER=built-in, 2026-11-23: "the status first showed the deletes 232ms after the
// first delete", then "expect 100, got 85").
func TestUpstreamRollingUpdateAndProportionalScalingForPodReplacement(t *testing.T) {
	atBudget(t, 1000, 10000)
	ctx := context.Background()
	ns := newNamespace(t)
	node := noKubeletNode(t, ns)

	const (
		terminatingReplicasFirstRS                  = 15
		terminatingReplicasSecondRS                 = 1
		expectedFirstRSReplicasDuringNewRollout     = int32(100)
		expectedSecondRSReplicasDuringNewRollout    = int32(20)
		expectedFirstRSReplicasAfterInFlightScaleUp = int32(117)
		expectedSecondRSReplicasAfterInFlightScale  = int32(23)
	)
	expectedTerminatingReplicasDuringNewRollout := ptr.To[int32](15)
	expectedTerminatingReplicasDuringInFlightScaleUp := ptr.To[int32](16)
	annotations := func(rev string) map[string]string {
		return map[string]string{k8s.DesiredReplicasAnnotation: "120", k8s.MaxReplicasAnnotation: "140", k8s.RevisionAnnotation: rev}
	}

	tester := newTester(t, upstreamDeployment("deployment", ns, 100))
	tester.deployment.Spec.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(20))
	tester.deployment.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	tester.deployment.Spec.Template.Spec.NodeName = node
	tester.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(300))
	tester.create()

	start := time.Now()
	if err := tester.waitForDeploymentCompleteAndMarkPodsReady(); err != nil {
		t.Fatal(err)
	}
	t.Logf("first rollout complete after %s", time.Since(start).Round(time.Millisecond))
	firstRS, err := tester.expectNewReplicaSet()
	if err != nil {
		t.Fatal(err)
	}

	// Diagnostics only: a passive watch notes when the status first shows the deletes.
	statusSeen := watchDeploymentStatus(t, ns, "deployment")

	// Terminate some replicas, then read the status at once, as upstream does.
	deleting := time.Now()
	t.Logf("deleting pods at %s", deleting.Format(time.StampMicro))
	defer func() {
		at, st, ok := statusSeen(deleting, func(st appsv1.DeploymentStatus) bool {
			return st.AvailableReplicas < 100 || ptr.Deref(st.TerminatingReplicas, 0) > 0
		})
		if ok {
			t.Logf("the status first showed the deletes %s after the first delete: available %d, terminating %d",
				at.Sub(deleting).Round(time.Millisecond), st.AvailableReplicas, ptr.Deref(st.TerminatingReplicas, -1))
		} else {
			t.Logf("the status never showed the deletes")
		}
	}()
	if err := tester.removeRSPods(ctx, firstRS, terminatingReplicasFirstRS, false, 300); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	t.Logf("deleted %d pods in %s", terminatingReplicasFirstRS, deleted.Sub(deleting).Round(time.Millisecond))
	if err := tester.waitForDeploymentCompleteAndMarkPodsReady(); err != nil {
		t.Fatal(err)
	}
	if st := tester.firstRead; st != nil {
		t.Logf("status read right after deleting %d pods: replicas %d, ready %d, available %d, terminating %d, complete %t; complete again %s after the deletes",
			terminatingReplicasFirstRS, st.Replicas, st.ReadyReplicas, st.AvailableReplicas, ptr.Deref(st.TerminatingReplicas, -1),
			k8s.DeploymentComplete(tester.deployment, st), time.Since(deleted).Round(time.Millisecond))
	}

	// Trigger a new rollout.
	tester.updateDeployment(func(update *appsv1.Deployment) {
		update.Spec.Template.Spec.Containers[0].Env = append(update.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "deploy2", Value: "true"})
	})
	expectedReplicasDuringNewRollout := expectedFirstRSReplicasDuringNewRollout + expectedSecondRSReplicasDuringNewRollout
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, expectedReplicasDuringNewRollout, expectedSecondRSReplicasDuringNewRollout, expectedFirstRSReplicasDuringNewRollout, expectedFirstRSReplicasDuringNewRollout, expectedSecondRSReplicasDuringNewRollout, expectedTerminatingReplicasDuringNewRollout); err != nil {
		t.Fatal(err)
	}
	secondRS, err := tester.expectNewReplicaSet()
	if err != nil {
		t.Fatal(err)
	}

	// Terminate additional replicas.
	if err := tester.removeRSPods(ctx, secondRS, terminatingReplicasSecondRS, false, 300); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, expectedReplicasDuringNewRollout, expectedSecondRSReplicasDuringNewRollout, expectedFirstRSReplicasDuringNewRollout, expectedFirstRSReplicasDuringNewRollout, expectedSecondRSReplicasDuringNewRollout, expectedTerminatingReplicasDuringInFlightScaleUp); err != nil {
		t.Fatal(err)
	}

	// Scale up during the rollout.
	tester.updateDeployment(func(update *appsv1.Deployment) { update.Spec.Replicas = ptr.To[int32](120) })
	expectedReplicasDuringInFlightScaleUp := expectedFirstRSReplicasAfterInFlightScaleUp + expectedSecondRSReplicasAfterInFlightScale
	expectedSurgeReplicas := expectedReplicasDuringInFlightScaleUp - expectedFirstRSReplicasDuringNewRollout
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, expectedReplicasDuringInFlightScaleUp, expectedSecondRSReplicasAfterInFlightScale, expectedFirstRSReplicasDuringNewRollout, expectedFirstRSReplicasDuringNewRollout, expectedSurgeReplicas, expectedTerminatingReplicasDuringInFlightScaleUp); err != nil {
		t.Fatal(err)
	}

	firstRS, err = env.kube.AppsV1().ReplicaSets(ns).Get(ctx, firstRS.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *firstRS.Spec.Replicas != expectedFirstRSReplicasAfterInFlightScaleUp {
		t.Fatalf("unexpected first RS .spec.replicas: expect %d, got %d", expectedFirstRSReplicasAfterInFlightScaleUp, *firstRS.Spec.Replicas)
	}
	if want := annotations("1"); !reflect.DeepEqual(want, firstRS.Annotations) {
		t.Fatalf("unexpected %q replica set annotations: got %v, want %v", firstRS.Name, firstRS.Annotations, want)
	}
	secondRS, err = env.kube.AppsV1().ReplicaSets(ns).Get(ctx, secondRS.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *secondRS.Spec.Replicas != expectedSecondRSReplicasAfterInFlightScale {
		t.Fatalf("unexpected second RS .spec.replicas: expect %d, got %d", expectedSecondRSReplicasAfterInFlightScale, *secondRS.Spec.Replicas)
	}
	if want := annotations("2"); !reflect.DeepEqual(want, secondRS.Annotations) {
		t.Fatalf("unexpected %q replica set annotations: got %v, want %v", secondRS.Name, secondRS.Annotations, want)
	}

	if err := tester.waitForDeploymentCompleteAndMarkPodsReadyAndRemoveTerminated(ctx); err != nil {
		t.Fatal(err)
	}
	for idx, rs := range []*appsv1.ReplicaSet{firstRS, secondRS} {
		cur, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := annotations(fmt.Sprint(idx + 1)); !reflect.DeepEqual(want, cur.Annotations) {
			t.Fatalf("unexpected %q replica set annotations at the end: got %v, want %v", cur.Name, cur.Annotations, want)
		}
	}
}

// watchDeploymentStatus records every status the Deployment is written with, by the test's
// clock, until the test ends. The returned func finds the first one after since that matches.
func watchDeploymentStatus(t *testing.T, ns, name string) func(since time.Time, match func(appsv1.DeploymentStatus) bool) (time.Time, appsv1.DeploymentStatus, bool) {
	t.Helper()
	type seen struct {
		at time.Time
		st appsv1.DeploymentStatus
	}
	var (
		mu   sync.Mutex
		log  []seen
		done = make(chan struct{})
	)
	// Its own connection: the test's client is busy marking pods Ready, and a watch sharing
	// its HTTP/2 connection can see events late.
	cfg, err := clientcmd.BuildConfigFromFlags("", env.stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil } // not cached: a new transport
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.AppsV1().Deployments(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatalf("watch deployment %s/%s: %v", ns, name, err)
	}
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				mu.Lock()
				log = append(log, seen{time.Now(), d.Status})
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func(since time.Time, match func(appsv1.DeploymentStatus) bool) (time.Time, appsv1.DeploymentStatus, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range log {
			if s.at.After(since) && match(s.st) {
				return s.at, s.st, true
			}
		}
		return time.Time{}, appsv1.DeploymentStatus{}, false
	}
}

// TestUpstreamRecreateForPodReplacement ports upstream's TestRecreateDeploymentForPodReplacement
// (DeploymentReplicaSetTerminatingReplicas=true): a Recreate rollout scales the old ReplicaSet
// to 0 and must not create or scale up the new one while an old pod is still terminating; once
// they are gone the new ReplicaSet comes up, and terminating pods of the new one show in the
// status through an in-flight scale up and down. On top of upstream, it holds the old pods
// Terminating for a few seconds and checks, with the bounds observer, that no new pod appears
// meanwhile.
func TestUpstreamRecreateForPodReplacement(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	node := noKubeletNode(t, ns)

	tester := newTester(t, upstreamDeployment("deployment", ns, 6))
	tester.deployment.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	tester.deployment.Spec.Template.Spec.NodeName = node
	tester.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(300))
	tester.create()

	if err := tester.waitForDeploymentCompleteAndMarkPodsReady(); err != nil {
		t.Fatal(err)
	}
	firstRS, err := tester.expectNewReplicaSet()
	if err != nil {
		t.Fatal(err)
	}

	obs := observe(t, ns, 7, 0)
	tester.updateDeployment(func(update *appsv1.Deployment) {
		update.Spec.Template.Spec.Containers[0].Env = append(update.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "deploy2", Value: "true"})
	})
	obs.mu.Lock()
	obs.recreateNew = k8s.PodTemplateHash(&tester.deployment.Spec.Template, tester.deployment.Status.CollisionCount)
	obs.mu.Unlock()

	// The old ReplicaSet goes to 0; its pods sit Terminating.
	firstRS.Spec.Replicas = ptr.To[int32](0)
	if err := tester.waitRSStable(firstRS); err != nil {
		t.Fatalf("old replicaset %s not scaled to 0: %v", firstRS.Name, err)
	}
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, 0, 0, 0, 0, 0, ptr.To[int32](6)); err != nil {
		t.Fatal(err)
	}
	if err := tester.expectNoNewReplicaSet(); err != nil {
		t.Fatal(err)
	}
	// Hold them a while: still no new ReplicaSet.
	holdUntil := time.Now().Add(4 * time.Second)
	for time.Now().Before(holdUntil) {
		if err := tester.expectNoNewReplicaSet(); err != nil {
			t.Fatalf("while %d old pods are terminating: %v", 6, err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// The kubelet's part: the terminating old pods go.
	if err := tester.removeRSPods(ctx, firstRS, math.MaxInt, true, 0); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, 6, 6, 0, 0, 6, ptr.To[int32](0)); err != nil {
		t.Fatal(err)
	}
	secondRS, err := tester.expectNewReplicaSet()
	if err != nil {
		t.Fatal(err)
	}

	// One new pod starts terminating.
	if err := tester.removeRSPods(ctx, secondRS, 1, false, 300); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, 6, 6, 0, 0, 6, ptr.To[int32](1)); err != nil {
		t.Fatal(err)
	}
	// Scale up, then down, during the rollout.
	tester.updateDeployment(func(update *appsv1.Deployment) { update.Spec.Replicas = ptr.To[int32](7) })
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, 7, 7, 0, 0, 7, ptr.To[int32](1)); err != nil {
		t.Fatal(err)
	}
	tester.updateDeployment(func(update *appsv1.Deployment) { update.Spec.Replicas = ptr.To[int32](5) })
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, 5, 5, 0, 0, 5, ptr.To[int32](3)); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentCompleteAndMarkPodsReady(); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, 5, 5, 5, 5, 0, ptr.To[int32](3)); err != nil {
		t.Fatal(err)
	}
	obs.stop()

	if err := tester.removeRSPods(ctx, firstRS, math.MaxInt, true, 0); err != nil {
		t.Fatal(err)
	}
	if err := tester.removeRSPods(ctx, secondRS, math.MaxInt, true, 0); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentStatusReplicasFields(ctx, 5, 5, 5, 5, 0, ptr.To[int32](0)); err != nil {
		t.Fatal(err)
	}
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:5 %s:r1:0", secondRS.Name, firstRS.Name); got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
}

// TestUpstreamDeploymentAvailableCondition ports upstream's TestDeploymentAvailableCondition:
// with minReadySeconds 3600, Ready pods are not available and the Available condition stays
// False (MinimumReplicasUnavailable); lowering minReadySeconds to 1 (which the controller must
// carry to the ReplicaSet) makes them available and the condition True.
func TestUpstreamDeploymentAvailableCondition(t *testing.T) {
	ns := newNamespace(t)
	node := noKubeletNode(t, ns)
	tester := newTester(t, upstreamDeployment("deployment", ns, 10))
	tester.deployment.Spec.MinReadySeconds = 3600
	tester.deployment.Spec.ProgressDeadlineSeconds = ptr.To[int32](7200)
	tester.deployment.Spec.Template.Spec.NodeName = node
	tester.create()

	if err := tester.waitForDeploymentUpdatedReplicasGTE(10); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentWithCondition("MinimumReplicasUnavailable", appsv1.DeploymentAvailable); err != nil {
		t.Fatal(err)
	}
	if err := tester.checkDeploymentStatusReplicasFields(10, 10, 0, 0, 10, ptr.To[int32](0)); err != nil {
		t.Fatal(err)
	}
	if err := tester.markUpdatedPodsReadyWithoutComplete(); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForReadyReplicas(); err != nil {
		t.Fatalf("readyReplicas never reached 10: %v", err)
	}
	if err := tester.waitForDeploymentWithCondition("MinimumReplicasUnavailable", appsv1.DeploymentAvailable); err != nil {
		t.Fatal(err)
	}
	if err := tester.checkDeploymentStatusReplicasFields(10, 10, 10, 0, 10, ptr.To[int32](0)); err != nil {
		t.Fatal(err)
	}

	tester.updateDeployment(func(update *appsv1.Deployment) { update.Spec.MinReadySeconds = 1 })
	if err := tester.waitForObservedDeployment(tester.deployment.Generation); err != nil {
		t.Fatal(err)
	}
	if err := tester.waitForDeploymentWithCondition("MinimumReplicasAvailable", appsv1.DeploymentAvailable); err != nil {
		t.Fatal(err)
	}
	// Upstream checks the counts at once here. Available turns True at 8 of 10 (maxUnavailable
	// 25%), and on this stack the test runs fast enough that some pods can have been Ready for
	// less than the new minReadySeconds then, so wait for the final counts instead.
	if err := tester.waitForDeploymentStatusReplicasFields(context.Background(), 10, 10, 10, 10, 0, ptr.To[int32](0)); err != nil {
		t.Fatal(err)
	}
	rss := replicaSets(t, ns)
	if len(rss) != 1 || rss[0].Spec.MinReadySeconds != 1 {
		t.Errorf("replicasets %s: want one, with minReadySeconds 1 (got %d)", rsSummary(rss), rss[0].Spec.MinReadySeconds)
	}
}

// TestUpstreamGeneralReplicaSetAdoption ports upstream's TestGeneralReplicaSetAdoption: a
// ReplicaSet whose only ownerReference is a non-controller one to another object gets our
// controllerRef added and keeps the other; one whose only ownerReference is a non-controller
// one to our Deployment gets it made the controller. The other owner is a real object (a
// ConfigMap) here: the garbage collector runs on this stack and deletes what only dangling
// owners hold.
func TestUpstreamGeneralReplicaSetAdoption(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	d := create(t, newDeployment(ns, "deployment", 1, "nginx:1.25"))
	waitComplete(t, ns, "deployment")
	rs := replicaSets(t, ns)[0]

	owner, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controllerRefPatch := func(ref metav1.OwnerReference, want []metav1.OwnerReference) {
		t.Helper()
		for range 10 {
			cur, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur.OwnerReferences = []metav1.OwnerReference{ref}
			if _, err = env.kube.AppsV1().ReplicaSets(ns).Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
				break
			} else if !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
		}
		var got *appsv1.ReplicaSet
		eventually(t, 30*time.Second, func() string {
			got, err = env.kube.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if metav1.GetControllerOf(got) == nil {
				return fmt.Sprintf("no controllerRef yet: %+v", got.OwnerReferences)
			}
			return ""
		})
		if ref := metav1.GetControllerOf(got); ref.UID != d.UID || ref.Kind != "Deployment" || ref.Name != d.Name || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Fatalf("controllerRef of %s = %+v, want our Deployment %s with blockOwnerDeletion", got.Name, *ref, d.UID)
		}
		if len(got.OwnerReferences) != len(want) {
			t.Fatalf("ownerReferences of %s = %+v, want %d: %+v", got.Name, got.OwnerReferences, len(want), want)
		}
		for _, w := range want {
			found := false
			for _, g := range got.OwnerReferences {
				if g.UID == w.UID && g.Kind == w.Kind && g.Name == w.Name && ptr.Deref(g.Controller, false) == ptr.Deref(w.Controller, false) {
					found = true
				}
			}
			if !found {
				t.Errorf("ownerReferences of %s = %+v, lack %+v", got.Name, got.OwnerReferences, w)
			}
		}
		// Nothing else changes: same ReplicaSet, same size, no new one.
		time.Sleep(time.Second)
		if rss := replicaSets(t, ns); len(rss) != 1 || rss[0].UID != rs.UID || *rss[0].Spec.Replicas != 1 {
			t.Fatalf("after adoption replicasets = %s, want only %s at 1", rsSummary(rss), rs.Name)
		}
	}

	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(false)}
	ours := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}
	controllerRefPatch(other, []metav1.OwnerReference{other, ours})

	oursNotController := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(false)}
	controllerRefPatch(oursNotController, []metav1.OwnerReference{ours})

	// A ReplicaSet made by someone else before the Deployment existed, with a non-controller
	// owner: adopted when the Deployment comes, its other owner kept.
	pre := newDeployment(ns, "pre", 2, "nginx:1.25")
	preRS := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "pre-manual", Namespace: ns, Labels: pre.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{other}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: pre.Spec.Selector.DeepCopy(), Template: *pre.Spec.Template.DeepCopy()},
	}
	preRS.Spec.Template.Spec.Containers[0].Image = "nginx:1.24"
	if _, err := env.kube.AppsV1().ReplicaSets(ns).Create(ctx, preRS, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pd := create(t, pre)
	waitComplete(t, ns, "pre")
	got, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, "pre-manual", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != pd.UID {
		t.Fatalf("pre-existing replicaset ownerReferences = %+v, want a controllerRef to %s", got.OwnerReferences, pd.UID)
	}
	if len(got.OwnerReferences) != 2 || (got.OwnerReferences[0].UID != owner.UID && got.OwnerReferences[1].UID != owner.UID) {
		t.Errorf("pre-existing replicaset ownerReferences = %+v, want the ConfigMap's kept and ours added", got.OwnerReferences)
	}
	if *got.Spec.Replicas != 0 {
		t.Errorf("adopted old replicaset at %d, want scaled to 0", *got.Spec.Replicas)
	}
}

// TestUpstreamSpecReplicasChange ports upstream's TestSpecReplicasChange: scaling a Recreate
// Deployment resizes its one ReplicaSet (no new one), and a change that is not to the template
// (revisionHistoryLimit, and here also metadata labels and annotations) is observed without a
// new ReplicaSet or revision.
func TestUpstreamSpecReplicasChange(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "deployment", 1, "nginx:1.25", recreate()))
	d := waitComplete(t, ns, "deployment")
	rs := expectedRSName(d)
	obs := observe(t, ns, 2, 0)
	for _, n := range []int32{2, 0, 1} {
		update(t, ns, "deployment", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(n) })
		// As upstream's scaleDeployment: the status counts reach n (DeploymentComplete), and
		// the one ReplicaSet is at n.
		waitRS(t, ns, "deployment", fmt.Sprintf("%s:r1:%d", rs, n), fmt.Sprintf("replicas=%d updated=%d ready=%d available=%d unavailable=0 terminating=0", n, n, n, n))
	}
	obs.stop()

	old := update(t, ns, "deployment", func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](4) })
	eventually(t, 30*time.Second, func() string {
		if d := getDeployment(t, ns, "deployment"); d.Status.ObservedGeneration < old.Generation {
			return fmt.Sprintf("observedGeneration %d < %d", d.Status.ObservedGeneration, old.Generation)
		}
		return ""
	})

	update(t, ns, "deployment", func(d *appsv1.Deployment) {
		if d.Labels == nil {
			d.Labels = map[string]string{}
		}
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Labels["tier"] = "backend"
		d.Annotations["example.com/owner"] = "team-a"
	})
	// An annotation change bumps the generation (annotations are copied to the new
	// ReplicaSet): it is observed, with no new ReplicaSet or revision.
	d = waitComplete(t, ns, "deployment")
	time.Sleep(2 * time.Second)
	if got, want := rsSummary(replicaSets(t, ns)), rs+":r1:1"; got != want {
		t.Fatalf("after a metadata-only change replicasets = %s, want %s", got, want)
	}
	if d = getDeployment(t, ns, "deployment"); d.Annotations[k8s.RevisionAnnotation] != "1" || rolloutPending(d) != "" {
		t.Errorf("after a metadata-only change revision %s, pending %q: want 1, complete", d.Annotations[k8s.RevisionAnnotation], rolloutPending(d))
	}
	// As upstream, the Deployment's annotations are copied to its new ReplicaSet.
	eventually(t, 30*time.Second, func() string {
		if rss := replicaSets(t, ns); len(rss) != 1 || rss[0].Annotations["example.com/owner"] != "team-a" {
			return fmt.Sprintf("replicaset annotations %v, want example.com/owner=team-a copied from the deployment", rss[0].Annotations)
		}
		return ""
	})
	if got, want := rsSummary(replicaSets(t, ns)), rs+":r1:1"; got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
}
