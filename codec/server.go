package codec

import (
	"net/http"

	"go.temporal.io/sdk/converter"
)

// The CORS answer for the Temporal UI, which calls the codec server from the browser with
// these headers (X-Namespace names the namespace, Authorization carries the user's token
// when the UI is set to pass it).
const (
	corsAllowHeaders = "Content-Type, X-Namespace, Authorization"
	corsAllowMethods = "POST, OPTIONS"
)

// maxBody bounds a request: the UI decodes a page of a history at once, each payload at most
// Temporal's 2 MB.
const maxBody = 64 << 20

// Handler serves Temporal's remote codec protocol (POST .../encode and .../decode with a JSON
// Payloads body, as the UI and `temporal --codec-endpoint` send) over pc. With corsOrigin set
// (the UI's origin, http://localhost:8233 for `temporal server start-dev`), it answers the
// browser's preflight and allows that origin; empty, it sends no CORS headers, which suits
// the temporal CLI.
func Handler(pc converter.PayloadCodec, corsOrigin string) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(pc)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if corsOrigin != "" {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", corsOrigin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				w.WriteHeader(http.StatusOK)
				return
			}
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed: use POST", http.StatusMethodNotAllowed)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		codec.ServeHTTP(w, r)
	})
}
