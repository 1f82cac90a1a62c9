package workflows

import (
	"bytes"
	"io"

	"go.temporal.io/sdk/temporal"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

var (
	saNamespace  = temporal.NewSearchAttributeKeyKeyword(SearchAttrNamespace)
	saDeployment = temporal.NewSearchAttributeKeyKeyword(SearchAttrDeployment)
	saRevision   = temporal.NewSearchAttributeKeyInt64(SearchAttrRevision)
	saOutcome    = temporal.NewSearchAttributeKeyKeyword(SearchAttrOutcome)
	saWaitingFor = temporal.NewSearchAttributeKeyKeyword(SearchAttrWaitingFor)
)
