package controllers_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	herdgatev1alpha1 "github.com/herdgate/herdgate/api/v1alpha1"
	"github.com/herdgate/herdgate/internal/kubectl"
	"github.com/herdgate/herdgate/test/builder"
	"github.com/herdgate/herdgate/test/testenv"
)

var _ = Describe("Secrets in outputs", func() {
	It("keeps a Redis password and a Secret's value out of conditions, Events, the manager's log and the plugin", func() {
		closed, err := testenv.FreePort()
		Expect(err).NotTo(HaveOccurred())
		urls := append(testenv.MalformedRedisURLs(), testenv.UnusableRedisURLs(closed, strings.TrimPrefix(redisSrv.URL(), "redis://"))...)
		// A bypass value too short to serve: refused, and never quoted.
		const shortValue = "pw-4hg7-s3"
		data := map[string][]byte{"token": []byte(shortValue)}
		for i, u := range urls {
			data[fmt.Sprintf("url%d", i)] = []byte(u)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mainNamespace, Name: "sweep-redis"}, Data: data}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, secret))).To(Succeed()) })
		var rooms []*herdgatev1alpha1.WaitingQueue
		for i := range urls {
			wq := builder.From(sampleQueue(mainNamespace, fmt.Sprintf("sweep-%d", i))).Redis("sweep-redis", fmt.Sprintf("url%d", i)).
				Bypass(herdgatev1alpha1.BypassRule{Name: "monitor", Header: &herdgatev1alpha1.BypassHeader{Name: "X-Monitor",
					ValueSecretRef: herdgatev1alpha1.SecretValueRef{Name: "sweep-redis", Key: "token"}}}).Obj()
			Expect(k8sClient.Create(ctx, wq)).To(Succeed())
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wq))).To(Succeed()) })
			rooms = append(rooms, wq)
		}

		By("letting every room find its Redis unusable")
		for i, wq := range rooms {
			Eventually(func(g Gomega) {
				c := meta.FindStatusCondition(get(wq).Status.Conditions, herdgatev1alpha1.ConditionRedisAvailable)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "room %d (%s): %s", i, urls[i], c.Message)
				g.Expect(c.Message).NotTo(BeEmpty())
			}, timeout, interval).Should(Succeed())
		}

		By("reading every output a user sees")
		var outputs []string
		for _, wq := range rooms {
			got := get(wq)
			for _, c := range got.Status.Conditions {
				outputs = append(outputs, c.Message)
			}
		}
		events := &eventsv1.EventList{}
		Expect(k8sClient.List(ctx, events, client.InNamespace(mainNamespace))).To(Succeed())
		warnings := 0
		for _, e := range events.Items {
			if strings.HasPrefix(e.Regarding.Name, "sweep-") {
				outputs = append(outputs, e.Note)
				if e.Type == corev1.EventTypeWarning {
					warnings++
				}
			}
		}
		Expect(warnings).To(BeNumerically(">=", len(rooms)), "every room records its Redis trouble")
		outputs = append(outputs, string(kubectlAs("sweep-viewer", "describe", "wq", "-n", mainNamespace)))
		outputs = append(outputs, string(kubectlAs("sweep-viewer", "get", "wq", "-n", mainNamespace, "-o", "wide")))
		user, err := testEnv.AddUser(envtest.User{Name: "sweep-plugin", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		config, err := user.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconfig, config, 0o600)).To(Succeed())
		for _, wq := range rooms {
			var stdout, stderr bytes.Buffer
			Expect(kubectl.Run(ctx, []string{"--kubeconfig", kubeconfig, "-n", mainNamespace, "status", wq.Name}, &stdout, &stderr)).To(Equal(0), stderr.String())
			Expect(stdout.String()).To(ContainSubstring("RedisAvailable no"))
			outputs = append(outputs, stdout.String(), stderr.String())
		}
		outputs = append(outputs, managerLog.String())

		for _, out := range outputs {
			Expect(out).NotTo(ContainSubstring(testenv.KnownPassword))
			Expect(out).NotTo(ContainSubstring(shortValue))
		}
	})
})
