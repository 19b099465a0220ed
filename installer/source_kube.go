package installer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// DefaultRetryTimeout bounds the retries of one Kubernetes read.
const DefaultRetryTimeout = time.Minute

// KubeSource reads ConfigMaps (data and binaryData) and Secrets (data) from
// one namespace. Optional objects that do not exist are skipped; connection
// errors, 5xx and 429 are retried with exponential backoff until
// RetryTimeout; any other 4xx fails at once.
type KubeSource struct {
	Client    kubernetes.Interface
	Namespace string
	// ConfigMaps and Secrets must exist.
	ConfigMaps, Secrets []string
	// OptionalConfigMaps and OptionalSecrets are skipped when NotFound.
	OptionalConfigMaps, OptionalSecrets []string
	// Revision, when positive, reads every object named <name> above as
	// <name>-<Revision>, the revisioned copy OpenShift's revision controller
	// makes (library-go's installer reads the same), and installs it as
	// <name>; default 0 reads the names as given.
	Revision int
	// RetryTimeout bounds the retries of each read; default DefaultRetryTimeout.
	RetryTimeout time.Duration
	// NewBackOff makes the backoff of one read; default exponential from
	// 250ms up to 10s, bounded by RetryTimeout on Clock.
	NewBackOff func() backoff.BackOff
	// Clock times the waits between retries (and the default backoff's
	// bound); default clock.RealClock.
	Clock clock.Clock
	// OnRetry is called before each retry (tests count them); optional.
	OnRetry func(err error, wait time.Duration)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

var _ Source = (*KubeSource)(nil)

// Load reads every named object.
func (s *KubeSource) Load(ctx context.Context) (*Config, error) {
	if s.Client == nil {
		return nil, errors.New("kubernetes source without a client")
	}
	c := &Config{}
	type want struct {
		kind     string
		names    []string
		optional bool
	}
	for _, w := range []want{
		{"ConfigMap", s.ConfigMaps, false}, {"ConfigMap", s.OptionalConfigMaps, true},
		{"Secret", s.Secrets, false}, {"Secret", s.OptionalSecrets, true},
	} {
		for _, name := range w.names {
			var err error
			if w.kind == "ConfigMap" {
				err = s.loadConfigMap(ctx, c, name, w.optional)
			} else {
				err = s.loadSecret(ctx, c, name, w.optional)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func (s *KubeSource) logger() *slog.Logger {
	l := s.Logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("component", "installer")
}

// apiName is the name of the object read for name: see Revision.
func (s *KubeSource) apiName(name string) string {
	if s.Revision > 0 {
		return fmt.Sprintf("%s-%d", name, s.Revision)
	}
	return name
}

func (s *KubeSource) loadConfigMap(ctx context.Context, c *Config, name string, optional bool) error {
	var data map[string][]byte
	err := s.get(ctx, "ConfigMap", s.apiName(name), func(ctx context.Context) error {
		cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, s.apiName(name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		data = make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			data[k] = v
		}
		return nil
	})
	if err != nil {
		return s.missing(err, "ConfigMap", s.apiName(name), optional)
	}
	for _, k := range sortedKeys(data) {
		if err := c.AddConfigMapKey(name, k, data[k]); err != nil {
			return fmt.Errorf("configmap %s/%s: %w", s.Namespace, s.apiName(name), err)
		}
	}
	return nil
}

func (s *KubeSource) loadSecret(ctx context.Context, c *Config, name string, optional bool) error {
	var data map[string][]byte
	err := s.get(ctx, "Secret", s.apiName(name), func(ctx context.Context) error {
		sec, err := s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, s.apiName(name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		data = sec.Data
		return nil
	})
	if err != nil {
		return s.missing(err, "Secret", s.apiName(name), optional)
	}
	for _, k := range sortedKeys(data) {
		if err := c.AddSecretKey(name, k, data[k]); err != nil {
			return fmt.Errorf("secret %s/%s: %w", s.Namespace, s.apiName(name), err)
		}
	}
	return nil
}

// missing turns a failed read into nil for an optional object that does not
// exist, and into a wrapped error otherwise.
func (s *KubeSource) missing(err error, kind, name string, optional bool) error {
	if optional && apierrors.IsNotFound(err) {
		s.logger().Info("optional object not found, skipped", "kind", kind, "namespace", s.Namespace, "name", name)
		return nil
	}
	return fmt.Errorf("read %s %s/%s: %w", kind, s.Namespace, name, err)
}

// get runs read with retries on transient errors.
func (s *KubeSource) get(ctx context.Context, kind, name string, read func(context.Context) error) error {
	clk := s.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	var b backoff.BackOff
	if s.NewBackOff != nil {
		b = s.NewBackOff()
	} else {
		timeout := s.RetryTimeout
		if timeout <= 0 {
			timeout = DefaultRetryTimeout
		}
		b = backoff.NewExponentialBackOff(
			backoff.WithInitialInterval(250*time.Millisecond),
			backoff.WithMaxInterval(10*time.Second),
			backoff.WithMaxElapsedTime(timeout),
			backoff.WithClockProvider(clk),
		)
	}
	op := func() error {
		err := read(ctx)
		if err != nil && !Retriable(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	notify := func(err error, wait time.Duration) {
		s.logger().Warn("reading object failed, retrying", "kind", kind, "namespace", s.Namespace, "name", name, "err", err, "wait", wait)
		if s.OnRetry != nil {
			s.OnRetry(err, wait)
		}
	}
	return backoff.RetryNotifyWithTimer(op, backoff.WithContext(b, ctx), notify, &backoffTimer{clock: clk})
}

// backoffTimer is backoff's Timer on a clock.Clock.
type backoffTimer struct {
	clock clock.Clock
	t     clock.Timer
}

var _ backoff.Timer = (*backoffTimer)(nil)

func (b *backoffTimer) Start(d time.Duration) {
	if b.t == nil {
		b.t = b.clock.NewTimer(d)
		return
	}
	b.t.Reset(d)
}

func (b *backoffTimer) Stop() {
	if b.t != nil {
		b.t.Stop()
	}
}

func (b *backoffTimer) C() <-chan time.Time { return b.t.C() }

// Retriable reports whether a Kubernetes read failing with err is worth
// retrying: 5xx, 429 and errors that are not API answers at all (connection
// refused, reset, timeouts). Other API answers (403, 404, ...) and a done
// context are final.
func Retriable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= 500 || code == 429 || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
			apierrors.IsInternalError(err)
	}
	return true
}
