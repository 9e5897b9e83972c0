use super::*;

#[test]
fn padding_is_optional_and_the_alphabet_standard() {
    assert_eq!(BASE64.decode("aGk=").unwrap(), b"hi");
    assert_eq!(BASE64.decode("aGk").unwrap(), b"hi");
    assert!(BASE64.decode("a-_k").is_err());
}

#[test]
fn names_stay_inside_the_folder() {
    let outer = tempfile::tempdir().unwrap();
    let inner = outer.path().join("up");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(inner.join("ok.bin"), b"fine").unwrap();
    std::fs::write(outer.path().join("secret"), b"secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outer.path().join("secret"), inner.join("link")).unwrap();
    let dir = UploadDir::new(&inner).unwrap();
    assert_eq!(&dir.read("ok.bin", 100).unwrap()[..], b"fine");
    std::fs::hard_link(outer.path().join("secret"), inner.join("hard")).unwrap();
    std::fs::create_dir(inner.join("sub")).unwrap();
    std::fs::write(inner.join("sub/in.bin"), b"deep").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(inner.join("sub"), inner.join("sublink")).unwrap();
    assert_eq!(&dir.read("sub/in.bin", 100).unwrap()[..], b"deep");
    for bad in [
        "../secret",
        "/etc/passwd",
        "./ok.bin",
        "",
        "a\nb",
        "link",
        "hard",
        "sublink/in.bin",
        "ok\u{202e}.bin",
    ] {
        assert!(dir.read(bad, 100).is_err(), "{bad:?} was read");
    }
    assert!(
        dir.read("ok.bin", 3)
            .unwrap_err()
            .contains("over the limit")
    );
}
