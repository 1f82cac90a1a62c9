package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A process tree's CPU counts the process's children, exited and waited for (PostgreSQL's
// backends come and go); the process's own utime+stime does not.
func TestReadTreeCPUCountsChildren(t *testing.T) {
	// The parent waits for a child that counts for about 0.3 s of CPU, then sleeps.
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; sleep 30`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var tree float64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var err error
		if tree, err = readProcTree().cpu(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if tree >= 0.2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	f, err := statFields(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	self := float64(utime+stime) / clockTicks
	if tree < 0.2 || self > 0.1 {
		t.Fatalf("tree CPU %.2f s, process alone %.2f s; want the child's ~0.3 s in the tree only", tree, self)
	}
}

func TestMachineCPU(t *testing.T) {
	s0, err := readMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("sh", "-c", `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`).Run(); err != nil {
		t.Fatal(err)
	}
	s1, err := readMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	m := s1.since(s0)
	if m.Seconds < 0.2 || m.Busy < 0.2 || m.Busy > m.Seconds {
		t.Fatalf("machine CPU %+v over a count of about 0.3 s of CPU, want busy ≥ 0.2 s and ≤ the interval's %.2f s", *m, m.Seconds)
	}
}

// TestSumMetric: the samples of the metric whose labels include the wanted ones, summed;
// other metrics and other operations are not.
func TestSumMetric(t *testing.T) {
	give := `# TYPE service_requests counter
service_requests{namespace="default",operation="RecordActivityTaskHeartbeat",service_name="frontend"} 7
service_requests{namespace="default",operation="RecordActivityTaskHeartbeat",service_name="history"} 2
service_requests{namespace="default",operation="StartWorkflowExecution",service_name="frontend"} 40
service_requests_total{operation="RecordActivityTaskHeartbeat"} 100
`
	got, err := sumMetric(strings.NewReader(give), "service_requests", func(l map[string]string) bool { return l["operation"] == "RecordActivityTaskHeartbeat" })
	if err != nil {
		t.Fatal(err)
	}
	if want := 9; got != want {
		t.Errorf("sumMetric = %d, want %d", got, want)
	}
}

func TestPersistenceWrite(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{give: "UpdateWorkflowExecution", want: true},
		{give: "AppendHistoryNodes", want: true},
		{give: "CreateTasks", want: true},
		{give: "CompleteTasksLessThan", want: true},
		{give: "UpsertWorkflowExecution", want: true},
		{give: "GetWorkflowExecution", want: false},
		{give: "ReadHistoryBranch", want: false},
		{give: "AssertShardOwnership", want: false},
		{give: "ListNamespaces", want: false},
	}
	for _, tt := range tests {
		if got := persistenceWrite(tt.give); got != tt.want {
			t.Errorf("persistenceWrite(%s) = %t, want %t", tt.give, got, tt.want)
		}
	}
}
