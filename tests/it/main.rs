
mod upstream;
