package admissionpolicy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apiserver/pkg/admission"
)

// A mutating webhook after the mutating policies, as the API server calls them: kube-apiserver's chain
// is MutatingAdmissionPolicy, MutatingAdmissionWebhook, ValidatingAdmissionPolicy (AllOrderedPlugins),
// wrapped in the reinvoker (k8s.io/apiserver/pkg/admission/reinvocation.go), so a policy with
// reinvocationPolicy IfNeeded runs again once when a webhook changed the object after it.
//
// The set's chain holds webhookPlugin in the webhook plugin's place. It does nothing unless the request
// is a Mutation (Set.BeginMutation): then, on the chain's first pass, it hands the object to the caller
// (the object the API server would send the webhook) and waits for the webhook's JSONPatch, which it
// applies as the API server's mutating webhook plugin applies a webhook's answer
// (k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go, callAttrMutatingHook and
// Dispatch: the patch applied to the versioned object's JSON, decoded, defaulted, the reinvocation asked
// for when it changed the object, converted back into the request's object). On the reinvoker's second
// pass it does nothing: the webhook is registered with reinvocationPolicy Never. Everything else (the
// policies' dispatch and reinvocation context, the reinvoker, audit annotations, warnings) is
// Kubernetes' own code.

const webhookPluginName = "celkeeper.io/MutatingWebhook"

func registerWebhook(plugins *admission.Plugins) {
	plugins.Register(webhookPluginName, func(io.Reader) (admission.Interface, error) {
		return &webhookPlugin{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete, admission.Connect)}, nil
	})
}

type webhookPlugin struct {
	*admission.Handler
}

var _ admission.MutationInterface = &webhookPlugin{}

type mutationKey struct{}

// errAborted ends a Mutation whose webhook answer will not come.
var errAborted = errors.New("the mutation was abandoned before the webhook answered")

func (w *webhookPlugin) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	m, _ := ctx.Value(mutationKey{}).(*Mutation)
	if m == nil || a.GetReinvocationContext().IsReinvoke() || a.GetObject() == nil {
		return nil
	}
	versioned, err := admission.NewVersionedAttributes(a, a.GetKind(), o)
	if err != nil {
		return err
	}
	serializer := json.NewSerializerWithOptions(json.DefaultMetaFactory, o.GetObjectCreater(), o.GetObjectTyper(), json.SerializerOptions{})
	objJS, err := runtime.Encode(serializer, versioned.VersionedObject)
	if err != nil {
		return err
	}
	select {
	case m.reached <- objJS:
	case <-ctx.Done():
		return ctx.Err()
	}
	var patch []byte
	select {
	case patch = <-m.patch:
	case <-ctx.Done():
		m.late = true
		return ctx.Err()
	}
	if patch == nil {
		return errAborted
	}
	// a patch that cannot be applied fails the request with an internal error, as the API server's
	// webhook plugin fails it
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("the webhook's patch cannot be decoded: %w", err))
	}
	if len(ops) == 0 {
		return nil
	}
	patchedJS, err := ops.Apply(objJS)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("the webhook's patch cannot be applied: %w", err))
	}
	var changedObj runtime.Object
	if _, ok := versioned.VersionedObject.(*unstructured.Unstructured); ok {
		changedObj = &unstructured.Unstructured{}
	} else if changedObj, err = o.GetObjectCreater().New(versioned.VersionedKind); err != nil {
		return apierrors.NewInternalError(err)
	}
	if changedObj, _, err = serializer.Decode(patchedJS, nil, changedObj); err != nil {
		return apierrors.NewInternalError(err)
	}
	changed := !apiequality.Semantic.DeepEqual(versioned.VersionedObject, changedObj)
	versioned.Dirty = true
	versioned.VersionedObject = changedObj
	o.GetObjectDefaulter().Default(versioned.VersionedObject)
	if changed {
		a.GetReinvocationContext().SetShouldReinvoke()
	}
	return o.GetObjectConvertor().Convert(versioned.VersionedObject, a.GetObject(), nil)
}

// Mutation is a request on its way through the mutating chain with a webhook after the policies: begun
// by Set.BeginMutation, it waits at the webhook (Object: what the webhook is sent) until Continue gives
// the webhook's JSONPatch; then the chain ends as the API server's would (the policies reinvoked when
// the webhook changed the object and they ask for it) and Continue returns the answer. Close abandons a
// Mutation that waits.
type Mutation struct {
	Object  []byte // the object the webhook is sent (nil when the chain ended before the webhook)
	reached chan []byte
	patch   chan []byte
	done    chan struct{}
	cancel  context.CancelFunc
	resp    *Response
	err     error
	late    bool // the deadline passed while the chain waited for the webhook's answer
}

// BeginMutation runs the mutating chain on a request until the webhook: the Mutation waits there (its
// Object set), or has ended before (refused by a policy, or no object to send: Continue returns the
// answer). The whole Mutation ends within timeout (0: no limit).
func (s *Set) BeginMutation(timeout time.Duration, req Request) (*Mutation, error) {
	ctx, cancel := context.WithCancel(context.Background())
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), timeout)
	}
	p, err := s.prepare(ctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	m := &Mutation{reached: make(chan []byte), patch: make(chan []byte, 1), done: make(chan struct{}), cancel: cancel}
	if p.attrs == nil {
		m.resp = p.resp
		close(m.done)
		return m, nil
	}
	go func() {
		defer close(m.done)
		defer func() { // a bug must not take the process down: the Mutation's error
			if r := recover(); r != nil {
				m.resp, m.err = nil, fmt.Errorf("internal error in celkeeper's native library: %v\n%s", r, debug.Stack())
			}
		}()
		m.resp, m.err = s.answerWith(context.WithValue(ctx, mutationKey{}, m), p, false)
	}()
	select {
	case m.Object = <-m.reached:
	case <-m.done:
	}
	return m, nil
}

// Continue gives the webhook's JSONPatch (empty: no change) to a Mutation waiting at the webhook and
// returns the API server's answer once the chain has ended (the answer of a Mutation that had ended).
func (m *Mutation) Continue(patch []byte) (*Response, error) {
	if m.Object != nil {
		if patch == nil {
			patch = []byte("[]")
		}
		select {
		case m.patch <- patch:
		default: // given already
		}
	}
	<-m.done
	m.cancel()
	if m.late { // not an answer of the API server's: the caller's deadline
		return nil, errors.New("the deadline passed before the webhook answered")
	}
	return m.resp, m.err
}

// Close abandons a Mutation (its chain ends without the webhook's answer).
func (m *Mutation) Close() {
	select {
	case m.patch <- nil:
	default:
	}
	m.cancel()
	<-m.done
}
