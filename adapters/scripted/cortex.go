package scripted

// The cortex-example target streams the complete example of the Cortex-Prime
// "Streaming Execution Protocol" v1.0 (Trafexofive/Cortex-MK1,
// docs/STREAMING_PROTOCOL.md, section "Complete Example") as plain text,
// token by token, the way a model trained on the format would write it:
// routed with xml: true, its five actions run (three async fetches, a sync
// analyzer that depends on them, a fire_and_forget cache write) while it
// streams.

// cortexExample is that example, verbatim.
const cortexExample = `<thought>
I'll research this topic by:
1. Fetching Wikipedia article for background
2. Searching arXiv for recent papers
3. Getting latest news articles
4. Analyzing all sources together
5. Generating a comprehensive report
</thought>

<action type="tool" mode="async" id="wiki">
{
  "name": "web_scraper",
  "parameters": {"url": "https://en.wikipedia.org/wiki/AI"},
  "output_key": "wiki_data"
}
</action>

<action type="tool" mode="async" id="arxiv">
{
  "name": "arxiv_search",
  "parameters": {"query": "machine learning", "max_results": 10},
  "output_key": "papers"
}
</action>

<action type="tool" mode="async" id="news">
{
  "name": "news_api",
  "parameters": {"topic": "artificial intelligence", "days": 7},
  "output_key": "news_articles"
}
</action>

<action type="agent" mode="sync" id="analyze">
{
  "name": "comprehensive_analyzer",
  "parameters": {
    "wikipedia": "$wiki_data",
    "research_papers": "$papers",
    "news": "$news_articles"
  },
  "depends_on": ["wiki", "arxiv", "news"],
  "output_key": "comprehensive_analysis"
}
</action>

<action type="relic" mode="fire_and_forget" id="cache">
{
  "name": "results_cache",
  "parameters": {
    "key": "ai_research_report",
    "value": "$comprehensive_analysis",
    "ttl": 86400
  },
  "depends_on": ["analyze"]
}
</action>

<response>
# AI Research Report

## Overview
Based on analysis of Wikipedia, recent research papers, and news articles:

$comprehensive_analysis

## Key Trends
1. Transformer architectures dominate
2. Ethical AI gaining attention
3. Multi-modal models emerging

## Recommendations
- Focus on efficiency improvements
- Consider ethical implications
- Monitor regulatory developments
</response>
`

// cortexTokenSizes is the cycle of token lengths (bytes) the example is cut
// into, so tags split at every kind of place; a multi-byte rune cut by it
// is held back by the stream's UTF-8 accumulator.
var cortexTokenSizes = [...]int{3, 1, 5, 2, 7, 4, 6, 2, 3}

// cortexTokens returns the example cut into tokens.
func cortexTokens() []string {
	var out []string
	for i, rest := 0, cortexExample; rest != ""; i++ {
		n := min(cortexTokenSizes[i%len(cortexTokenSizes)], len(rest))
		out = append(out, rest[:n])
		rest = rest[n:]
	}
	return out
}
