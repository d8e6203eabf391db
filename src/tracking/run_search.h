// MLflow's run search: the filter language of `search_runs` (clauses joined by AND, each
// `metrics.k > 1`, `params.k = 'v'`, `tags.k LIKE 'a%'`, `attributes.status = 'FINISHED'`, keys
// quoted with backticks or double quotes) and its order_by (`metrics.loss DESC`, ...). Runs are
// filtered and ordered in memory after TrackingStore::ListRuns: an experiment holds few runs.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "tracking/entities.h"

namespace air::tracking {

struct SearchRequest {
  std::string filter;
  std::vector<std::string> order_by;
  int max_results = 1000;
  std::string page_token;  // "" or the offset returned by the previous page
};

struct SearchPage {
  std::vector<Run> runs;
  std::string next_page_token;  // "" on the last page
};

// InvalidArgument naming the bad clause when the filter or an order_by does not parse.
Result<SearchPage> SearchRuns(std::vector<Run> runs, const SearchRequest& request);

}  // namespace air::tracking
