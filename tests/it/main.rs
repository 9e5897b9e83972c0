mod upstream;
