package restapi

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
)

// UploadCall is the POST /ingestions of one report: a multipart/form-data
// body whose one part, "file", carries content under name (which must end
// in .ocsf.json for the API to take it). With size ≥ 0 the body has a
// Content-Length and is streamed from content without being held in
// memory; with size < 0 it is streamed chunked.
func UploadCall(name string, content io.Reader, size int64) (Call, error) {
	var frame bytes.Buffer
	mw := multipart.NewWriter(&frame)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, ReportField, name))
	h.Set("Content-Type", "application/json")
	if _, err := mw.CreatePart(h); err != nil {
		return Call{}, err
	}
	head := bytes.Clone(frame.Bytes())
	frame.Reset()
	if err := mw.Close(); err != nil {
		return Call{}, err
	}
	tail := bytes.Clone(frame.Bytes())
	call := Call{Method: http.MethodPost, Path: PathIngestions, ContentType: mw.FormDataContentType()}
	if size >= 0 {
		content = io.LimitReader(content, size)
		call.ContentLength = int64(len(head)) + size + int64(len(tail))
	}
	// Wrapping the body hides its type from net/http, which therefore sets
	// no GetBody: the upload cannot be replayed, so neither the transport
	// nor a 307/308 can send it twice.
	call.Body = io.NopCloser(io.MultiReader(bytes.NewReader(head), content, bytes.NewReader(tail)))
	return call, nil
}
