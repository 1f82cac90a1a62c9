package workflows

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/contract"
)

// fillValue sets every exported field reachable from v to a value other than its zero: strings
// name their path, numbers are 7, booleans true, pointers, slices and maps get one element.
func fillValue(v reflect.Value, path string, depth int) {
	if depth > 8 {
		return
	}
	if v.Type().ConvertibleTo(reflect.TypeOf(time.Time{})) && v.Kind() == reflect.Struct {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 6, 0, 7, 0, time.UTC)).Convert(v.Type()))
		return
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("Time"); f.IsValid() && f.Type() == reflect.TypeOf(time.Time{}) {
			f.Set(reflect.ValueOf(time.Date(2026, 11, 29, 6, 0, 7, 0, time.UTC)))
			return
		}
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(7.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), path, depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillValue(s.Index(0), path+"[0]", depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillValue(k, path+".key", depth+1)
		fillValue(e, path+".value", depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				fillValue(v.Field(i), path+"."+f.Name, depth+1)
			}
		}
	}
}

// TestStateCarriedWhole: a run hands its state to the next whole. Every field of State, each
// set by reflection, goes through a run (newRollout from the input, nextInput for the
// continue-as-new) and the SDK's data converter both ways, and comes back as it went in:
// a field added to State is carried with no other line written, and one that is lost (a JSON
// tag "-", a field the run resets) fails here.
func TestStateCarriedWhole(t *testing.T) {
	var give State
	fillValue(reflect.ValueOf(&give).Elem(), "state", 0)
	give.Notifications = nil                              // delivered by the run (resumeWaits), not handed on once sent
	give.Status.Namespace, give.Status.Name = "ns", "web" // the input's Deployment
	for i := 0; i < reflect.TypeOf(give).NumField(); i++ {
		f := reflect.TypeOf(give).Field(i)
		if f.Name != "Notifications" && reflect.ValueOf(give).Field(i).IsZero() {
			t.Fatalf("State.%s was not filled", f.Name)
		}
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) (Input, error) {
		r := newRollout(ctx, in)
		return r.nextInput(in.State.Idle), nil
	}, workflow.RegisterOptions{Name: "carry"})
	env.ExecuteWorkflow("carry", Input{Input: contract.Input{Namespace: "ns", Name: "web"}, State: &give})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var next Input
	if err := env.GetWorkflowResult(&next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil {
		t.Fatal("the next run's input has no state")
	}
	want := give
	want.Runs++ // the run is counted
	got, wv := reflect.ValueOf(*next.State), reflect.ValueOf(want)
	for i := 0; i < got.NumField(); i++ {
		name := got.Type().Field(i).Name
		// Compared as JSON: a time read back is the same instant in the local zone.
		g, _ := json.Marshal(got.Field(i).Interface())
		w, _ := json.Marshal(wv.Field(i).Interface())
		if string(g) != string(w) {
			t.Errorf("State.%s: the next run got %s, want %s", name, g, w)
		}
	}
}
