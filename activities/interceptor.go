package activities

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// ErrorCounter is a worker interceptor that counts failed activity attempts (local ones
// included) in Metrics.ActivityErrors, by activity type.
type ErrorCounter struct {
	interceptor.WorkerInterceptorBase
	Metrics *Metrics
}

// InterceptActivity wraps each activity execution.
func (e *ErrorCounter) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &errorCounterInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, m: e.Metrics}
}

type errorCounterInbound struct {
	interceptor.ActivityInboundInterceptorBase
	m *Metrics
}

func (i *errorCounterInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	res, err := i.Next.ExecuteActivity(ctx, in)
	if err != nil && i.m != nil {
		i.m.ActivityErrors.WithLabelValues(activity.GetInfo(ctx).ActivityType.Name).Inc()
	}
	return res, err
}
