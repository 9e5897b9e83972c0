mod monitor;
mod monitor_browser;
