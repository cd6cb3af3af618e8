package dialect

// The steps SchemaObjects builds from what it reads of the source (the
// engine's own statements, as pg_get_*def and SHOW CREATE give them).
func init() {
	objectSteps := func(pg func(Postgres) []Step, my func(MySQL) []Step) func(d Dialect, _ fixture) string {
		return func(d Dialect, _ fixture) string {
			switch d := d.(type) {
			case Postgres:
				return mysqlGoldenSteps(pg(d))
			case MySQL:
				return mysqlGoldenSteps(my(d))
			}
			return "no steps"
		}
	}
	goldenCases = append(goldenCases,
		goldenCase{"SchemaObjects", "routines", objectSteps(
			func(p Postgres) []Step {
				return []Step{
					p.functionStep(`"Sales".order_code(bigint)`, false, "CREATE OR REPLACE FUNCTION \"Sales\".order_code(p_id bigint)\n RETURNS text\n LANGUAGE sql\n IMMUTABLE\nAS $function$SELECT 'ORD-' || p_id$function$\n"),
					p.functionStep("public.touch(integer)", true, "CREATE OR REPLACE PROCEDURE public.touch(IN n integer)\n LANGUAGE plpgsql\nAS $procedure$BEGIN PERFORM n; END$procedure$\n"),
				}
			},
			func(m MySQL) []Step {
				return []Step{
					m.routineStep(StepFunction, "order_code", "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION",
						"CREATE DEFINER=`app``s`@`%` FUNCTION `order_code`(p_id BIGINT) RETURNS varchar(20) CHARSET utf8mb4\n    DETERMINISTIC\n    NO SQL\nRETURN CONCAT('ORD-', p_id)"),
					m.routineStep(StepProcedure, "Touch It", "ANSI_QUOTES",
						"CREATE DEFINER=app@localhost PROCEDURE `Touch It`(IN n INT)\n    SQL SECURITY INVOKER\nSELECT n"),
				}
			})},
		goldenCase{"SchemaObjects", "views", objectSteps(
			func(p Postgres) []Step {
				return []Step{
					p.viewStep([]string{"Sales", "Big Orders"}, `"Sales"."Big Orders"`, " SELECT id,\n    total\n   FROM \"Sales\".orders\n  WHERE (total >= (100)::numeric);", "check_option=local, security_barrier=true", false, true),
					p.viewStep([]string{"public", "stats"}, "public.stats", " SELECT count(*) AS n\n   FROM public.orders;", "", true, true),
					p.viewStep([]string{"public", "later"}, "public.later", " SELECT 1 AS one;", "fillfactor=70", true, false),
				}
			},
			func(m MySQL) []Step {
				return []Step{
					m.viewStep("Big Orders", "CREATE ALGORITHM=MERGE DEFINER=`app`@`10.0.%` SQL SECURITY INVOKER VIEW `Big Orders` AS select `o`.`id` AS `id` from `orders` `o` where `o`.`total` >= 100 WITH LOCAL CHECK OPTION"),
					m.viewStep("plain", "CREATE VIEW `plain` AS select 1 AS `one`"),
				}
			})},
		goldenCase{"SchemaObjects", "triggers", objectSteps(
			func(p Postgres) []Step {
				return []Step{
					p.triggerStep([]string{"public", "tickets"}, "fill code", `CREATE TRIGGER "fill code" BEFORE INSERT ON public.tickets FOR EACH ROW EXECUTE FUNCTION public.fill_code()`, "O"),
					p.triggerStep([]string{"Sales", "orders"}, "audit", `CREATE TRIGGER audit AFTER UPDATE ON "Sales".orders FOR EACH ROW WHEN ((old.* IS DISTINCT FROM new.*)) EXECUTE FUNCTION public.audit()`, "D"),
					p.triggerStep([]string{"Sales", "orders"}, "replicated", `CREATE TRIGGER replicated AFTER INSERT ON "Sales".orders FOR EACH ROW EXECUTE FUNCTION public.audit()`, "R"),
				}
			},
			func(m MySQL) []Step {
				return []Step{
					m.triggerStep("tickets", "fill code", "STRICT_ALL_TABLES",
						"CREATE DEFINER=`app`@`%` TRIGGER `fill code` BEFORE INSERT ON tickets FOR EACH ROW SET NEW.code = COALESCE(NEW.code, 'x')"),
					m.triggerStep("tickets", "odd mode", "STRICT_ALL_TABLES'; DROP TABLE x; --", "CREATE DEFINER=`app`@`%` TRIGGER `odd mode` AFTER INSERT ON tickets FOR EACH ROW SET @n = 1"),
				}
			})},
	)
}
