package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/temporal-rollout/rollout/contract"
)

// SearchAttributeLister is the part of Temporal's operator service the search-attribute check
// calls; client.Client.OperatorService() has it.
type SearchAttributeLister interface {
	ListSearchAttributes(ctx context.Context, in *operatorservice.ListSearchAttributesRequest, opts ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error)
}

// CheckSearchAttributes fails at once, naming each one and the command that creates it, when
// a search attribute of want is not registered on the Temporal namespace with its type:
// without it every workflow start of the watcher (--search-attributes) is rejected, and the
// watcher would retry for ever; a workflow that upserts it (the release workflow, --releases)
// fails its workflow task for ever. flag names the setting that needs them, in the error. An
// unreachable server is retried for at most timeout. A server that does not let us list them
// (PermissionDenied, Unimplemented; some hosted namespaces) is logged and not checked.
func CheckSearchAttributes(ctx context.Context, logger *slog.Logger, ops SearchAttributeLister, namespace, flag string, want []contract.SearchAttribute, timeout time.Duration) error {
	what := "the search attributes of Temporal namespace " + namespace
	return Wait(ctx, logger, what, timeout, attemptTimeout, retryInterval, func(ctx context.Context) error {
		resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if s, ok := status.FromError(err); ok && (s.Code() == codes.PermissionDenied || s.Code() == codes.Unimplemented) {
			logger.Warn("Cannot list search attributes; not checked (register them first: see README)", "temporalNamespace", namespace, "for", flag, "error", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("list search attributes: %w", err)
		}
		if err := missingSearchAttributes(namespace, flag, resp, want); err != nil {
			return Permanent(err)
		}
		return nil
	})
}

// missingSearchAttributes names every attribute of want that resp lacks or has with another
// type, in want's order, and the commands that fix it, on one line.
func missingSearchAttributes(namespace, flag string, resp *operatorservice.ListSearchAttributesResponse, want []contract.SearchAttribute) error {
	var missing, fixes []string
	for _, sa := range want {
		create := fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s", namespace, sa.Name, sa.Type)
		got, ok := resp.GetCustomAttributes()[sa.Name]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s (%s)", sa.Name, sa.Type))
			fixes = append(fixes, create)
		case got != sa.Type:
			missing = append(missing, fmt.Sprintf("%s (%s, registered as %s)", sa.Name, sa.Type, got))
			fixes = append(fixes, fmt.Sprintf("temporal operator search-attribute remove --namespace %s --name %s --yes", namespace, sa.Name), create)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s needs %s registered; run: %s", flag, strings.Join(missing, ", "), strings.Join(fixes, " && "))
}
