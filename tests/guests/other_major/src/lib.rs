//! A component built against a future major version of the WIT package (1.0.0), whose
//! contract differs: the runner must refuse it by version, naming both.

wit_bindgen::generate!({
    inline: r#"
        package bench:scenario@1.0.0;

        interface host {
            log: func(message: string);
        }

        interface workload {
            describe: func() -> string;
        }

        world scenario {
            import host;
            export workload;
        }
    "#,
    world: "scenario",
});

struct Future;

impl exports::bench::scenario::workload::Guest for Future {
    fn describe() -> String {
        bench::scenario::host::log("describe");
        "from the future".into()
    }
}

export!(Future);
