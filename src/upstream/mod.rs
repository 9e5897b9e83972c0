//! Building and sending the real HTTP request for `api_execute`: server URL, path
//! interpolation, allowed headers, injected credentials, timeouts, redirects, response budget.
