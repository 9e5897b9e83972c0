
mod index;
