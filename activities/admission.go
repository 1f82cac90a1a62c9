package activities

import (
	"sync"
	"time"

	"github.com/temporal-rollout/rollout/kube"
)

const (
	// admitBacklog: while a request sent now would wait longer than this for its client-budget
	// token, AwaitChange holds the moves it sees (see Admission).
	admitBacklog = 500 * time.Millisecond
	// maxHold bounds how long AwaitChange holds one move: past it the move goes to the
	// workflow whatever the budget.
	maxHold = 30 * time.Second
	// writesPerMove is what a sync's move costs the budget, about: a scale and its status.
	writesPerMove = 2
	// busyBacklog: a sync's write that would wait longer than this for its token is refused
	// (ErrBusy, see Activities.busy). Above admitBacklog, so a sync just admitted is not.
	busyBacklog = 750 * time.Millisecond
)

// Admission paces the moves AwaitChange hands to the workflow while the client budget is
// saturated. A move handed over becomes a workflow task that waits for a task slot and then,
// inside its slot, for budget tokens: on a saturated budget (QPS 20, 100 rollouts) those tasks
// queued by the dozen in the task queue and in the slots, and a user's pause, status query or
// promote queued behind them for seconds. Held in AwaitChange instead (a goroutine asleep on
// the cache), a move costs nothing, and it goes to the workflow once the budget's queue is
// short: the budget stays busy, so the rollouts lose nothing, and the task queue stays short
// for the user's commands.
//
// While the budget has a token free every move goes at once. While requests queue for up to
// admitBacklog, moves go one at a time, writesPerMove tokens apart (QPS 20: every 100ms).
// Past admitBacklog, moves wait.
type Admission struct {
	budget kube.Budget
	mu     sync.Mutex
	next   time.Time
}

// NewAdmission paces moves on budget; nil admits every move at once.
func NewAdmission(budget kube.Budget) *Admission {
	if budget == nil {
		return nil
	}
	return &Admission{budget: budget}
}

// Wait reports how long a move seen at now should wait before it goes to the workflow: 0 to
// go now (which counts it as gone).
func (ad *Admission) Wait(now time.Time) time.Duration {
	if ad == nil {
		return 0
	}
	backlog := ad.budget.Backlog()
	if backlog == 0 {
		return 0
	}
	if backlog > admitBacklog {
		return min(backlog-admitBacklog, 250*time.Millisecond)
	}
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if now.Before(ad.next) {
		return ad.next.Sub(now)
	}
	gap := time.Second
	if qps := ad.budget.QPS(); qps > 0 {
		gap = time.Duration(float64(writesPerMove) / float64(qps) * float64(time.Second))
	}
	ad.next = now.Add(gap)
	return 0
}
