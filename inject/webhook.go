package inject

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
)

// maxReview bounds an AdmissionReview body; the API server sends objects
// well under its own 3 MiB request limit.
const maxReview = 4 << 20

// Webhook serves the injection as a mutating admission webhook on /mutate:
// an AdmissionReview v1 in, the same review with a JSONPatch response out.
// It never denies: a workload it cannot read is admitted unchanged, with a
// warning, so a bad annotation does not block a deployment.
func Webhook(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mutate", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxReview))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
			http.Error(w, fmt.Sprintf("want an AdmissionReview v1 with a request: %v", err), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		ops, err := Patch(review.Request.Object.Raw, o, false)
		switch {
		case err != nil:
			resp.Warnings = []string{"kproxy sidecar not injected: " + err.Error()}
		case len(ops) > 0:
			p, err := json.Marshal(ops)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = p, &pt
		}
		review.Response, review.Request = resp, nil
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(review)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}
