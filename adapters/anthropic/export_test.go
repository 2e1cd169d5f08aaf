package anthropic

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Update reports the -update flag to the external tests.
func Update() bool { return *update }

// DecodeRequestForTest is the frontend's request decoding, with the
// anthropic-beta values the header carried.
func DecodeRequestForTest(body []byte, betas ...string) (*canonical.Request, *canonical.Error) {
	d, e := decodeRequest(body)
	if e != nil {
		return nil, e
	}
	if len(betas) > 0 {
		l := &structpb.ListValue{}
		for _, b := range betas {
			l.Values = append(l.Values, structpb.NewStringValue(b))
		}
		d.req.Extensions[extBeta] = structpb.NewListValue(l)
	}
	return d.req, nil
}
