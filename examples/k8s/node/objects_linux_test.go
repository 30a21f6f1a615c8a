//go:build linux && nodetest

package node_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resourcePath is where the API server keeps objects of a kind.
func resourcePath(kind, ns string) string {
	switch kind {
	case "Namespace":
		return "/api/v1/namespaces"
	case "Deployment":
		return "/apis/apps/v1/namespaces/" + ns + "/deployments"
	case "EndpointSlice":
		return "/apis/discovery.k8s.io/v1/namespaces/" + ns + "/endpointslices"
	case "MutatingWebhookConfiguration":
		return "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
	}
	return "/api/v1/namespaces/" + ns + "/" + strings.ToLower(kind) + "s"
}

// create posts obj (a typed object of kind, in ns) and decodes the
// API server's answer into it.
func (c *cluster) create(t *testing.T, kind, ns string, obj any) {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := c.do("POST", resourcePath(kind, ns), b)
	if err != nil || code/100 != 2 {
		t.Fatalf("create %s in %q: %d %v: %s", kind, ns, code, err, body)
	}
	if err := json.Unmarshal(body, obj); err != nil {
		t.Fatal(err)
	}
}

// get reads one object into obj and says whether it exists.
func (c *cluster) get(t *testing.T, kind, ns, name string, obj any) bool {
	t.Helper()
	code, body, err := c.do("GET", resourcePath(kind, ns)+"/"+name, nil)
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", kind, ns, name, err)
	}
	if code == 404 {
		return false
	}
	if code != 200 {
		t.Fatalf("get %s %s/%s: %d %s", kind, ns, name, code, body)
	}
	if err := json.Unmarshal(body, obj); err != nil {
		t.Fatal(err)
	}
	return true
}

// patch merge-patches one object.
func (c *cluster) patch(t *testing.T, kind, ns, name string, p any) {
	t.Helper()
	b, _ := json.Marshal(p)
	code, body, err := c.do("PATCH", resourcePath(kind, ns)+"/"+name, b)
	if err != nil || code != 200 {
		t.Fatalf("patch %s %s/%s: %d %v: %s", kind, ns, name, code, err, body)
	}
}

// namespace makes a namespace for one test, deleted when it ends (its
// pods stopped by the kubelet first), and dumps its pods' state and logs
// if the test failed.
func (c *cluster) namespace(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	c.create(t, "Namespace", "", &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	})
	// Pods are admitted only once the controller manager has made the
	// namespace's default ServiceAccount.
	waitFor(t, time.Minute, "the default ServiceAccount in "+name, func() bool {
		var sa corev1.ServiceAccount
		return c.get(t, "ServiceAccount", name, "default", &sa)
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.describe(name))
		}
		c.do("DELETE", "/api/v1/namespaces/"+name, nil)
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if code, _, _ := c.do("GET", "/api/v1/namespaces/"+name, nil); code == 404 {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Errorf("namespace %s was not deleted within 2m", name)
	})
	return name
}

// pods lists a namespace's pods, optionally by label selector.
func (c *cluster) pods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	path := resourcePath("Pod", ns)
	if selector != "" {
		path += "?labelSelector=" + url.QueryEscape(selector)
	}
	code, body, err := c.do("GET", path, nil)
	if err != nil || code != 200 {
		t.Fatalf("list pods in %s: %d %v: %s", ns, code, err, body)
	}
	var list corev1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitFor polls cond until it holds, failing the test with what after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitPod waits until the named pod meets cond.
func (c *cluster) waitPod(t *testing.T, ns, name string, d time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	waitFor(t, d, fmt.Sprintf("pod %s/%s: %s", ns, name, what), func() bool {
		return c.get(t, "Pod", ns, name, &p) && cond(&p)
	})
	return &p
}

// waitEndpoints waits until the Service's EndpointSlice lists a ready
// endpoint: a pod's Ready condition reaches the slice (and then
// kube-proxy's rules) a moment later, and a client started in between
// finds no backend behind the Service's address.
func (c *cluster) waitEndpoints(t *testing.T, ns, service string, d time.Duration) {
	t.Helper()
	path := resourcePath("EndpointSlice", ns) + "?labelSelector=" + url.QueryEscape("kubernetes.io/service-name="+service)
	waitFor(t, d, fmt.Sprintf("a ready endpoint of service %s/%s", ns, service), func() bool {
		code, body, err := c.do("GET", path, nil)
		if err != nil || code != 200 {
			return false
		}
		var list discoveryv1.EndpointSliceList
		if json.Unmarshal(body, &list) != nil {
			return false
		}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					return true
				}
			}
		}
		return false
	})
}

// logs returns a container's log through the API server (which asks the
// kubelet).
func (c *cluster) logs(t *testing.T, ns, pod, container string) string {
	t.Helper()
	code, body, err := c.do("GET", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/log?container=%s", ns, pod, container), nil)
	if err != nil || code != 200 {
		t.Fatalf("logs of %s/%s/%s: %d %v: %s", ns, pod, container, code, err, body)
	}
	return string(body)
}

// describe sums up a namespace's pods for a failure: phase, each
// container's state, the end of each container's log, and the events.
func (c *cluster) describe(ns string) string {
	var b strings.Builder
	_, body, _ := c.do("GET", resourcePath("Pod", ns), nil)
	var list corev1.PodList
	json.Unmarshal(body, &list)
	for _, p := range list.Items {
		fmt.Fprintf(&b, "pod %s: %s %s\n", p.Name, p.Status.Phase, p.Status.Message)
		for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			state, _ := json.Marshal(st.State)
			fmt.Fprintf(&b, "  %s ready=%v restarts=%d %s\n", st.Name, st.Ready, st.RestartCount, state)
			_, log, _ := c.do("GET", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/log?container=%s&tailLines=40", ns, p.Name, st.Name), nil)
			fmt.Fprintf(&b, "  --- log:\n%s\n", log)
		}
	}
	_, body, _ = c.do("GET", "/api/v1/namespaces/"+ns+"/events", nil)
	var events corev1.EventList
	json.Unmarshal(body, &events)
	for _, e := range events.Items {
		fmt.Fprintf(&b, "event %s %s: %s %s\n", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
	}
	return b.String()
}

// Handy pieces of pod specs.
var always = corev1.ContainerRestartPolicyAlways

func int64p(v int64) *int64 { return &v }
func boolp(v bool) *bool    { return &v }
