package k8s

// CheckAnalysis validates an analysis as an analysis step of the steps annotation is, and
// returns it with the defaults filled in (count 1, interval 10s, onNoData pause). Other
// workflows (releases) measure the same analyses.
func CheckAnalysis(a AnalysisStep) (*AnalysisStep, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	return a.withDefaults(), nil
}
